//! A compact exact Gaussian process: RBF kernel, fixed hyperparameters, Cholesky solve, on plain `Vec<f64>`.
//!
//! Targets are standardised (mean 0, variance 1) before the fit, so one signal variance (1) and one length
//! scale ([`LENGTH_SCALE`], in the feature units of [`Space::features`](super::space::Space::features): a
//! variant one-hot differs by √2, a segment or batch step by at most 1) serve every surrogate; [`NOISE`] is the
//! observation noise, small enough that the posterior mean interpolates its training points. Hyperparameters
//! are not fitted: the searches have a few to a few dozen points each, too few to fit them well.

/// The RBF kernel's length scale.
pub const LENGTH_SCALE: f64 = 1.0;
/// The observation noise variance (of the standardised targets).
pub const NOISE: f64 = 1e-6;

/// A fitted Gaussian process.
#[derive(Debug, Clone)]
pub struct Gp {
    x: Vec<Vec<f64>>,
    /// Lower-triangular Cholesky factor of K + noise·I, row-major n×n.
    chol: Vec<f64>,
    /// (K + noise·I)⁻¹ (y − mean) / scale.
    alpha: Vec<f64>,
    mean: f64,
    scale: f64,
}

fn kernel(a: &[f64], b: &[f64]) -> f64 {
    let d2: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    (-0.5 * d2 / (LENGTH_SCALE * LENGTH_SCALE)).exp()
}

/// Solve L z = b for lower-triangular L (row-major n×n).
fn forward(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|j| l[i * n + j] * z[j]).sum();
        z[i] = (b[i] - s) / l[i * n + i];
    }
    z
}

/// Solve Lᵀ z = b for lower-triangular L.
fn backward(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|j| l[j * n + i] * z[j]).sum();
        z[i] = (b[i] - s) / l[i * n + i];
    }
    z
}

impl Gp {
    /// Fit to points `x` with targets `y` (the same length, at least one); `None` when there is no point or
    /// the kernel matrix is not positive definite (duplicate points with different targets at tiny noise).
    pub fn fit(x: Vec<Vec<f64>>, y: &[f64]) -> Option<Gp> {
        let n = x.len();
        if n == 0 || y.len() != n {
            return None;
        }
        let mean = y.iter().sum::<f64>() / n as f64;
        let var = y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let scale = var.sqrt().max(1e-6);
        let mut l = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let k = kernel(&x[i], &x[j]) + if i == j { NOISE } else { 0.0 };
                let s: f64 = (0..j).map(|m| l[i * n + m] * l[j * n + m]).sum();
                if i == j {
                    let d = k - s;
                    if d <= 0.0 {
                        return None;
                    }
                    l[i * n + i] = d.sqrt();
                } else {
                    l[i * n + j] = (k - s) / l[j * n + j];
                }
            }
        }
        let ys: Vec<f64> = y.iter().map(|v| (v - mean) / scale).collect();
        let alpha = backward(&l, n, &forward(&l, n, &ys));
        Some(Gp { x, chol: l, alpha, mean, scale })
    }

    /// The posterior mean and standard deviation at `x`, in the targets' units.
    pub fn predict(&self, x: &[f64]) -> (f64, f64) {
        let n = self.x.len();
        let k: Vec<f64> = self.x.iter().map(|xi| kernel(xi, x)).collect();
        let mu: f64 = k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = forward(&self.chol, n, &k);
        let var = (1.0 - v.iter().map(|a| a * a).sum::<f64>()).max(1e-12);
        (self.mean + self.scale * mu, self.scale * var.sqrt())
    }
}

/// Φ, the standard normal CDF (Abramowitz–Stegun 7.1.26 on erf, error < 1.5·10⁻⁷).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 { 0.5 * (1.0 + erf) } else { 0.5 * (1.0 - erf) }
}

/// φ, the standard normal density.
pub fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_posterior_mean_interpolates_its_training_points_and_is_certain_there() {
        let x: Vec<Vec<f64>> = (0..6).map(|i| vec![f64::from(i) * 0.7, (f64::from(i) * 1.3).sin()]).collect();
        let y: Vec<f64> = x.iter().map(|p| 3.0 * p[0] - p[1] * p[1] + 10.0).collect();
        let gp = Gp::fit(x.clone(), &y).expect("distinct points fit");
        for (p, want) in x.iter().zip(&y) {
            let (mu, sd) = gp.predict(p);
            assert!((mu - want).abs() < 1e-3, "{mu} vs {want}");
            assert!(sd < 0.05, "sd {sd} at a training point");
        }
        // Far from every point: the prior mean and (nearly) the prior spread.
        let (mu, sd) = gp.predict(&[100.0, 100.0]);
        let mean = y.iter().sum::<f64>() / y.len() as f64;
        assert!((mu - mean).abs() < 1e-6 && sd > 0.5, "{mu} {sd}");
    }

    #[test]
    fn the_normal_cdf_matches_known_values() {
        for (z, want) in [(0.0, 0.5), (1.0, 0.841_344_7), (-1.96, 0.024_997_9), (2.326, 0.989_992)] {
            assert!((normal_cdf(z) - want).abs() < 1e-5, "Φ({z}) = {}", normal_cdf(z));
        }
    }
}
