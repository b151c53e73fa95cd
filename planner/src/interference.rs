//! gpu-lets' interference model (Choi et al., ATC 2022, §4.4), as measured: how much slower a model runs beside
//! another on the other half of its GPU, predicted from the two models' solo L2 and DRAM utilisations. A
//! [`Problem`](crate::Problem) carries it to the `gpulet` strategy ([`crate::gpulet`]), which plans with it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::PlanError;
use crate::profile::{Records, joined, why};

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
        let util: Vec<UtilisationRow> = read_table(utilisation, &["model", "l2", "dram"])?;
        let by_name: BTreeMap<&str, Utilisation> =
            util.iter().map(|r| (r.model.as_str(), Utilisation { l2: r.l2, dram: r.dram })).collect();
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
        for r in read_table::<PairRow>(pairs, &["model", "neighbour", "slowdown"])? {
            samples.push(Sample { this: of(&r.model, pairs)?, other: of(&r.neighbour, pairs)?, slowdown: r.slowdown });
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

/// A row of the utilisation table: a model's solo utilisation (its other columns, `batch`, are not read).
#[derive(Deserialize)]
struct UtilisationRow {
    model: String,
    l2: f64,
    dram: f64,
}

/// A row of the co-run table: a model's slowdown beside a neighbour (its other columns are not read).
#[derive(Deserialize)]
struct PairRow {
    model: String,
    neighbour: String,
    slowdown: f64,
}

/// The rows of the CSV table at `path`: a header that names at least `columns`, in any order (others are
/// ignored), then a row per line; lines starting `#` are comments. Errors name the file and the line.
fn read_table<Row: DeserializeOwned>(path: &Path, columns: &[&str]) -> Result<Vec<Row>, PlanError> {
    let at = |what: String| PlanError::Input(format!("{}: {what}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let mut records = Records::new(&text, Some(b'#'));
    let (line, header) = records
        .next()
        .transpose()
        .map_err(at)?
        .ok_or_else(|| at(format!("empty table: expected a header naming the columns {}", columns.join(", "))))?;
    if let Some(c) = columns.iter().find(|c| !header.iter().any(|h| h == **c)) {
        return Err(at(format!("line {line}: no column `{c}` in the header `{}`", joined(&header))));
    }
    records
        .map(|record| {
            let (line, record) = record.map_err(at)?;
            record
                .deserialize(Some(&header))
                .map_err(|e| at(format!("line {line}: {} in `{}`", why(&e, &header, &record), joined(&record))))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Comments, blank lines and other columns are passed over; a malformed row is named by its file and line.
    #[test]
    fn a_malformed_row_is_named_by_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let (util, pairs) = (dir.path().join("util.csv"), dir.path().join("pairs.csv"));
        std::fs::write(&util, "# measured\n\nmodel,batch,l2,dram\na,8,0.1,0.2\nb,8, 0.3 ,0.1\n").unwrap();
        let rows: Vec<UtilisationRow> = read_table(&util, &["model", "l2", "dram"]).unwrap();
        assert_eq!((rows.len(), rows[1].model.as_str(), rows[1].l2), (2, "b", 0.3));
        std::fs::write(&pairs, "model,neighbour,slowdown\n# a comment\na,b,0.1\n\nb,a,slow\n").unwrap();
        let err = MeasuredInterference::read(&util, &pairs, &["a"]).unwrap_err().to_string();
        assert!(err.contains("pairs.csv: line 5: `slowdown` is not a number in `b,a,slow`"), "{err}");
        std::fs::write(&pairs, "model,neighbour\na,b\n").unwrap();
        let err = MeasuredInterference::read(&util, &pairs, &["a"]).unwrap_err().to_string();
        assert!(err.contains("pairs.csv: line 1: no column `slowdown`"), "{err}");
        std::fs::write(&util, "model,batch,l2,dram\na,8,0.1\n").unwrap();
        let err = MeasuredInterference::read(&util, &pairs, &["a"]).unwrap_err().to_string();
        assert!(err.contains("util.csv: line 2: the row ends before column `dram` in `a,8,0.1`"), "{err}");
    }
}
