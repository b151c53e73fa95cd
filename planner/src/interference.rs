//! gpu-lets' interference model (Choi et al., ATC 2022, §4.4), as measured: how much slower a model runs beside
//! another on the other half of its GPU, predicted from the two models' solo L2 and DRAM utilisations. A
//! [`Problem`](crate::Problem) carries it to the `gpulet` strategy ([`crate::gpulet`]), which plans with it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::PlanError;

/// A model's solo utilisation on a gpu-let of some size, as Nsight Compute reports it: the paper's features.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Utilisation {
    /// L2 cache utilisation, a fraction.
    pub l2: f64,
    /// DRAM bandwidth utilisation, a fraction.
    pub dram: f64,
}

/// One measured co-location: a model's and its neighbour's solo utilisations, and how much slower the model ran
/// beside the neighbour than alone (co-run latency over solo latency, less 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The model's.
    pub this: Utilisation,
    /// Its neighbour's.
    pub other: Utilisation,
    /// Its slowdown.
    pub slowdown: f64,
}

/// gpu-lets' interference model (§4.4): `slowdown = c1·l2 + c2·l2' + c3·dram + c4·dram' + c5`, the model's
/// solo L2 and DRAM utilisations and its neighbour's, fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterferenceModel {
    /// c1 … c5.
    pub coefficients: [f64; 5],
}

impl InterferenceModel {
    /// Fit to `samples` (at least 5, not all alike), by least squares.
    pub fn fit(samples: &[Sample]) -> Result<InterferenceModel, PlanError> {
        let features = |s: &Sample| [s.this.l2, s.other.l2, s.this.dram, s.other.dram, 1.0];
        // The normal equations XᵀX c = Xᵀy, by Gaussian elimination with partial pivoting.
        let mut a = [[0.0f64; 6]; 5];
        for s in samples {
            let x = features(s);
            for i in 0..5 {
                for j in 0..5 {
                    a[i][j] += x[i] * x[j];
                }
                a[i][5] += x[i] * s.slowdown;
            }
        }
        for col in 0..5 {
            let pivot = (col..5).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).expect("rows");
            if a[pivot][col].abs() < 1e-12 {
                return Err(PlanError::Input(format!(
                    "{} co-location samples do not determine the interference model: measure pairs whose L2 and DRAM \
                     utilisations vary",
                    samples.len()
                )));
            }
            a.swap(col, pivot);
            let pivot_row = a[col];
            for (_, r) in a.iter_mut().enumerate().filter(|(row, _)| *row != col) {
                let f = r[col] / pivot_row[col];
                for (x, p) in r[col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= f * p;
                }
            }
        }
        Ok(InterferenceModel { coefficients: std::array::from_fn(|i| a[i][5] / a[i][i]) })
    }

    /// The slowdown of a model of utilisation `this` beside one of `other` (never below 0).
    pub fn predict(&self, this: Utilisation, other: Utilisation) -> f64 {
        let c = self.coefficients;
        (c[0] * this.l2 + c[1] * other.l2 + c[2] * this.dram + c[3] * other.dram + c[4]).max(0.0)
    }
}

/// Interference as measured: the model fitted to co-run samples, each model's solo utilisation (in the problem's
/// model order), and how well the fit reproduces its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredInterference {
    /// The fitted model.
    pub model: InterferenceModel,
    /// Each model's solo utilisation.
    pub utilisation: Vec<Utilisation>,
    /// Mean absolute difference between the fit's and the measured slowdowns, over the samples.
    pub fit_error: f64,
    /// Samples fitted.
    pub samples: usize,
}

impl MeasuredInterference {
    /// Model `m`'s slowdown beside `neighbour` (none: the other half of the GPU is free).
    pub fn slowdown(&self, m: usize, neighbour: Option<(usize, u32)>) -> f64 {
        neighbour.map_or(0.0, |(n, _)| self.model.predict(self.utilisation[m], self.utilisation[n]))
    }

    /// Read a utilisation table (`model,batch,l2,dram`) and a co-run table (`model,neighbour,…,slowdown`), as
    /// `scripts/gpulet_interference.py` writes them, for `models` (their names in the tables), and fit.
    pub fn read(utilisation: &Path, pairs: &Path, models: &[&str]) -> Result<MeasuredInterference, PlanError> {
        let util = read_table(utilisation, &["model", "l2", "dram"])?;
        let by_name: BTreeMap<&str, Utilisation> = util
            .iter()
            .map(|r| {
                (
                    r[0].as_str(),
                    Utilisation { l2: r[1].parse().unwrap_or(f64::NAN), dram: r[2].parse().unwrap_or(f64::NAN) },
                )
            })
            .collect();
        let of = |name: &str, file: &Path| {
            by_name.get(name).copied().filter(|u| u.l2.is_finite() && u.dram.is_finite()).ok_or_else(|| {
                PlanError::Input(format!(
                    "{}: no utilisation of model `{name}` (named in {}): measure it with `scripts/gpulet_interference.py util`",
                    utilisation.display(),
                    file.display()
                ))
            })
        };
        let mut samples = Vec::new();
        for r in read_table(pairs, &["model", "neighbour", "slowdown"])? {
            let slowdown = r[2].parse::<f64>().map_err(|_| {
                PlanError::Input(format!(
                    "{}: slowdown `{}` of `{}` beside `{}` is not a number",
                    pairs.display(),
                    r[2],
                    r[0],
                    r[1]
                ))
            })?;
            samples.push(Sample { this: of(&r[0], pairs)?, other: of(&r[1], pairs)?, slowdown });
        }
        let model = InterferenceModel::fit(&samples).map_err(|e| match e {
            PlanError::Input(why) => PlanError::Input(format!("{}: {why}", pairs.display())),
            e => e,
        })?;
        let fit_error = samples.iter().map(|s| (model.predict(s.this, s.other) - s.slowdown).abs()).sum::<f64>()
            / samples.len() as f64;
        let utilisation = models.iter().map(|m| of(m, Path::new("the spec"))).collect::<Result<_, _>>()?;
        Ok(MeasuredInterference { model, utilisation, fit_error, samples: samples.len() })
    }
}

/// The rows of a CSV table with a header (lines starting `#` are comments), as the named columns.
fn read_table(path: &Path, columns: &[&str]) -> Result<Vec<Vec<String>>, PlanError> {
    let at = |what: String| PlanError::Input(format!("{}: {what}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let header: Vec<&str> = lines.next().ok_or_else(|| at("empty table".into()))?.split(',').map(str::trim).collect();
    let index: Vec<usize> = columns
        .iter()
        .map(|c| header.iter().position(|h| h == c).ok_or_else(|| at(format!("no column `{c}` in the header"))))
        .collect::<Result<_, _>>()?;
    lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            index
                .iter()
                .map(|&i| f.get(i).map(|v| v.to_string()).ok_or_else(|| at(format!("short line `{line}`"))))
                .collect()
        })
        .collect()
}
