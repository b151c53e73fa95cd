//! The gateway's state directory: deployed bundles and the apps that use them, kept across restarts.
//!
//! ```text
//! STATE/bundles/<sha256>/   an uploaded bundle, unpacked; named by the SHA-256 of its packed bytes
//! STATE/apps/<app>.json     a deployed app: its bundle's hash and its plan (an `AppRecord`)
//! STATE/tmp/                uploads being unpacked
//! STATE/lock                held locked by the one gateway using the directory; names its process
//! ```
//!
//! Gateway replicas with cluster state in etcd ([`crate::cluster`]) share one directory for the bundles alone
//! ([`Store::open_shared`]: a volume every replica mounts): apps live in etcd, each replica unpacks uploads in
//! `STATE/tmp/<replica>/`, nobody holds the lock, and unused bundles stay (a bundle is named by its bytes, so a
//! redeploy of the same bundle reuses it).
//!
//! Every write is atomic and durable: files are written under a temporary name, synced, renamed into place
//! and their directory synced. A bundle directory appears only once fully unpacked and synced, and an app
//! record only names a bundle already in place, so a crash (even `kill -9`) at any point leaves either the old
//! state or the new one.
//!
//! The state repairs itself. A deploy of bytes already stored unpacks them again and compares the stored
//! directory with them: one damaged since (a file truncated, changed, missing or added) is replaced by the
//! upload, so redeploying the bundle repairs it. A single gateway, on start, removes the bundles no app record
//! names: those of a deploy killed between unpacking and recording.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use jig_manifest::{self as bundle, Bundle, InvalidBundle};

/// What is stored of a deployed app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppRecord {
    /// The app's name.
    pub name: String,
    /// SHA-256 of the packed bundle, hex.
    pub bundle: String,
    /// Seconds since the Unix epoch.
    pub deployed_at: u64,
    /// The demand windows (req/s) the app was last planned for, so a restart plans the same.
    #[serde(default)]
    pub demand_windows: Vec<f64>,
}

/// A state directory, held by this process until the last clone is dropped (or shared by gateway replicas).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    /// `STATE/lock`, locked: two gateways on one directory would each clear the other's uploads and
    /// overwrite its records. `None` when shared by replicas.
    lock: Option<std::sync::Arc<std::fs::File>>,
    /// Where this gateway unpacks uploads.
    tmp: PathBuf,
}

impl Store {
    /// Open (creating if needed) the state directory at `root`, clearing unfinished uploads. Fails when another
    /// process holds it.
    pub fn open(root: &Path) -> anyhow::Result<Store> {
        std::fs::create_dir_all(root)
            .map_err(|e| anyhow::anyhow!("cannot create the state directory {}: {e}", root.display()))?;
        let store =
            Store { root: root.to_path_buf(), lock: Some(std::sync::Arc::new(lock(root)?)), tmp: root.join("tmp") }
                .prepare()?;
        // A deploy killed after unpacking its bundle and before recording its app left the bundle unnamed: remove
        // it now, while nothing runs (apps are restored from their records after this). Only here, holding the
        // lock, where the records in `apps/` are the whole truth; a shared directory ([`Store::open_shared`])
        // is never swept, as another replica may be deploying (or reusing) any bundle in it at this moment.
        if let Err(e) = store.collect_garbage(&Default::default()) {
            tracing::warn!("keeping every stored bundle: {e}");
        }
        Ok(store)
    }

    /// Open the bundles of the directory gateway replicas share, as replica `id` (see the module docs).
    pub fn open_shared(root: &Path, id: &str) -> anyhow::Result<Store> {
        std::fs::create_dir_all(root)
            .map_err(|e| anyhow::anyhow!("cannot create the state directory {}: {e}", root.display()))?;
        Store { root: root.to_path_buf(), lock: None, tmp: root.join("tmp").join(id) }.prepare()
    }

    /// Create the directories, and clear this gateway's unfinished uploads.
    fn prepare(self) -> anyhow::Result<Store> {
        let store = self;
        for dir in [store.bundles(), store.apps(), store.tmp()] {
            std::fs::create_dir_all(&dir)
                .map_err(|e| anyhow::anyhow!("cannot create the state directory {}: {e}", dir.display()))?;
        }
        // Whatever is in tmp/ was being unpacked when the process stopped.
        for entry in std::fs::read_dir(store.tmp())?.flatten() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
        Ok(store)
    }

    fn bundles(&self) -> PathBuf {
        self.root.join("bundles")
    }
    fn apps(&self) -> PathBuf {
        self.root.join("apps")
    }
    fn tmp(&self) -> PathBuf {
        self.tmp.clone()
    }

    /// Store a packed bundle and open it. Returns its hash. When the same bytes are stored already, the stored
    /// directory is kept if it holds exactly what they unpack to, and replaced by them if it was damaged since.
    pub fn put_bundle(&self, archive: &[u8], max_bytes: u64) -> Result<(String, Bundle), PutError> {
        let hash = hex::encode(Sha256::digest(archive));
        let dir = self.bundles().join(&hash);
        let scratch = tempfile::Builder::new().prefix("upload-").tempdir_in(self.tmp()).map_err(PutError::Io)?;
        let unpacked = scratch.path().join("bundle");
        let mut bundle = bundle::unpack(archive, &unpacked, max_bytes)?;
        // The hash covers the archive, not the files unpacked from it, so a stored directory is checked against
        // a fresh unpacking (memory stays one archive; a redeploy costs what the first deploy did).
        // `symlink_metadata`: whatever is at that path, even a file or a link, is compared (and replaced).
        let mut aside = None;
        if dir.symlink_metadata().is_ok() {
            let Some(damage) = difference(&dir, &unpacked) else {
                bundle.dir = dir;
                return Ok((hash, bundle));
            };
            let app = &bundle.manifest.name;
            tracing::warn!(%app, "the stored bundle {} was damaged ({damage}); replacing it with the upload", dir.display());
            // Moved aside into tmp/ (removed once the upload is in place, or on the next start): never
            // half-deleted in place.
            let damaged = tempfile::Builder::new().prefix("damaged-").tempdir_in(self.tmp()).map_err(PutError::Io)?;
            match std::fs::rename(&dir, damaged.path().join("bundle")) {
                Ok(()) => {}
                // Another replica moved it first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(PutError::Io(std::io::Error::new(
                        e.kind(),
                        format!(
                            "app `{app}`: the stored bundle {} is damaged ({damage}) and cannot be moved aside: {e}; \
                             remove that directory and deploy again",
                            dir.display()
                        ),
                    )));
                }
            }
            aside = Some(damaged);
        }
        sync_tree(&unpacked).map_err(PutError::Io)?;
        match std::fs::rename(&unpacked, &dir) {
            Ok(()) => {}
            // Another upload of the same bytes got there first.
            Err(_) if dir.is_dir() => {}
            Err(e) => return Err(PutError::Io(e)),
        }
        sync_dir(&self.bundles()).map_err(PutError::Io)?;
        drop(aside);
        // Checked as it was unpacked; the same bytes, now in place.
        bundle.dir = dir;
        Ok((hash, bundle))
    }

    /// The stored bundle with this hash.
    pub fn bundle(&self, hash: &str) -> Result<Bundle, InvalidBundle> {
        Bundle::open(&self.bundles().join(hash))
    }

    /// Record `app` as deployed (replacing an earlier record of the same name).
    pub fn put_app(&self, app: &AppRecord) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(app).map_err(std::io::Error::other)?;
        write_atomic(&self.apps().join(format!("{}.json", app.name)), &json)
    }

    /// Forget `app`; true when it was deployed. Its bundle stays until [`Store::collect_garbage`].
    pub fn delete_app(&self, name: &str) -> std::io::Result<bool> {
        let path = self.apps().join(format!("{name}.json"));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        }
        sync_dir(&self.apps())?;
        Ok(true)
    }

    /// Every deployed app, by name. Records that cannot be read are reported and skipped.
    pub fn apps_list(&self) -> std::io::Result<Vec<AppRecord>> {
        let mut apps = Vec::new();
        for entry in std::fs::read_dir(self.apps())? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<AppRecord>(&b).map_err(|e| e.to_string()))
            {
                Ok(app) => apps.push(app),
                Err(e) => tracing::error!("skipping app record {}: {e}", path.display()),
            }
        }
        apps.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(apps)
    }

    /// Remove the bundles that no app record names and that are not in `running`. Any record that cannot be
    /// read stops the collection (its bundle might be in use). A bundle is first moved into `tmp/`, so a crash
    /// midway leaves no half-deleted bundle where a later deploy would find it.
    pub fn collect_garbage(&self, running: &std::collections::HashSet<String>) -> std::io::Result<()> {
        if self.lock.is_none() {
            return Ok(()); // shared: other replicas' apps, in etcd, may use any bundle
        }
        let mut used = running.clone();
        for entry in std::fs::read_dir(self.apps())? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let record: AppRecord = serde_json::from_slice(&std::fs::read(&path)?).map_err(|e| {
                std::io::Error::other(format!("{} is unreadable ({e}); not removing any bundle", path.display()))
            })?;
            used.insert(record.bundle);
        }
        for entry in std::fs::read_dir(self.bundles())? {
            let entry = entry?;
            if used.contains(entry.file_name().to_string_lossy().as_ref()) {
                continue;
            }
            let doomed = tempfile::Builder::new().prefix("unused-").tempdir_in(self.tmp())?.keep();
            std::fs::rename(entry.path(), doomed.join("bundle"))?;
            std::fs::remove_dir_all(&doomed)?;
            tracing::info!("removed the bundle {}, which no app uses", entry.path().display());
        }
        Ok(())
    }
}

/// Why a bundle could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum PutError {
    /// The upload is not a usable bundle.
    #[error(transparent)]
    Invalid(#[from] InvalidBundle),
    /// The state directory refused the write.
    #[error("cannot write to the state directory: {0}")]
    Io(std::io::Error),
}

/// Write `bytes` to a new file at `path` and sync it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Replace `path` with `bytes` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    write_synced(tmp.path(), bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Sync a directory's entries.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Lock `root/lock` for this process and write its pid there, or say which process holds it.
fn lock(root: &Path) -> anyhow::Result<std::fs::File> {
    use std::io::{Read, Seek, Write};
    let path = root.join("lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            file.rewind()?;
            write!(file, "{}", std::process::id())?;
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() { "another process".to_string() } else { format!("process {holder}") };
            anyhow::bail!(
                "the state directory {} is in use by {who} (another jig gateway?): stop it, or give this one \
                 another --state-dir",
                root.display()
            )
        }
        Err(std::fs::TryLockError::Error(e)) => anyhow::bail!("cannot lock {}: {e}", path.display()),
    }
}

/// How the tree at `stored` differs from the tree at `fresh` (entries, their kinds, files' bytes), if it does.
/// Anything that cannot be read counts as a difference.
fn difference(stored: &Path, fresh: &Path) -> Option<String> {
    use std::io::Read;
    let shown = stored.display();
    let (kind, want) = match (stored.symlink_metadata(), fresh.symlink_metadata()) {
        (Ok(kind), Ok(want)) => (kind, want),
        (Err(e), _) => return Some(format!("{shown}: {e}")),
        (_, Err(e)) => return Some(format!("{}: {e}", fresh.display())),
    };
    if want.is_dir() {
        if !kind.is_dir() {
            return Some(format!("{shown} is not a directory"));
        }
        let names = |dir: &Path| -> std::io::Result<std::collections::BTreeSet<std::ffi::OsString>> {
            std::fs::read_dir(dir)?.map(|e| e.map(|e| e.file_name())).collect()
        };
        let (have, need) = match (names(stored), names(fresh)) {
            (Ok(have), Ok(need)) => (have, need),
            (Err(e), _) => return Some(format!("{shown}: {e}")),
            (_, Err(e)) => return Some(format!("{}: {e}", fresh.display())),
        };
        if let Some(name) = need.difference(&have).next() {
            return Some(format!("{} is missing", stored.join(name).display()));
        }
        if let Some(name) = have.difference(&need).next() {
            return Some(format!("{} is not in the bundle", stored.join(name).display()));
        }
        return need.iter().find_map(|name| difference(&stored.join(name), &fresh.join(name)));
    }
    if !kind.is_file() {
        return Some(format!("{shown} is not a plain file"));
    }
    if kind.len() != want.len() {
        return Some(format!("{shown} holds {} bytes, not {}", kind.len(), want.len()));
    }
    let (mut a, mut b) = match (std::fs::File::open(stored), std::fs::File::open(fresh)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) => return Some(format!("{shown}: {e}")),
        (_, Err(e)) => return Some(format!("{}: {e}", fresh.display())),
    };
    let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = match b.read(&mut y) {
            Ok(n) => n,
            Err(e) => return Some(format!("{}: {e}", fresh.display())),
        };
        if let Err(e) = a.read_exact(&mut x[..n]) {
            return Some(format!("{shown}: {e}"));
        }
        if x[..n] != y[..n] {
            return Some(format!("{shown} has other bytes"));
        }
        if n == 0 {
            return match a.read(&mut x[..1]) {
                Ok(0) => None,
                Ok(_) => Some(format!("{shown} holds more bytes than the bundle")),
                Err(e) => Some(format!("{shown}: {e}")),
            };
        }
    }
}

/// Sync a directory and every directory below it (the files in it are synced as they are written).
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            sync_tree(&entry.path())?;
        }
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gateway_holds_a_state_directory() {
        let dir = tempfile::tempdir().unwrap();
        let first = Store::open(dir.path()).unwrap();
        let held = first.clone();
        drop(first);
        // The lock belongs to the open file, so even a second open in this process is refused.
        let error = Store::open(dir.path()).unwrap_err().to_string();
        assert!(error.contains(&format!("is in use by process {}", std::process::id())), "{error}");
        assert!(error.contains("another --state-dir"), "{error}");
        drop(held);
        Store::open(dir.path()).expect("free once the last clone is dropped");
    }

    /// A packed bundle `name` with one task, whose glue holds `glue`.
    fn packed(name: &str, glue: &[u8]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let manifest = format!("name = \"{name}\"\n[[tasks]]\nname = \"t\"\nglue = \"glue/t.wasm\"\n");
        std::fs::create_dir(dir.path().join("glue")).unwrap();
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("glue/t.wasm"), glue).unwrap();
        bundle::pack(&Bundle::open(dir.path()).unwrap()).unwrap()
    }

    #[test]
    fn a_redeploy_keeps_an_intact_bundle_and_replaces_a_damaged_one() {
        use std::os::unix::fs::MetadataExt;
        let state = tempfile::tempdir().unwrap();
        let store = Store::open(state.path()).unwrap();
        let archive = packed("x", &[7; 100_000]);
        let (hash, bundle) = store.put_bundle(&archive, 1 << 20).unwrap();
        let glue = bundle.dir.join("glue/t.wasm");
        let inode = std::fs::metadata(&bundle.dir).unwrap().ino();
        assert_eq!(store.put_bundle(&archive, 1 << 20).unwrap().0, hash);
        assert_eq!(std::fs::metadata(&bundle.dir).unwrap().ino(), inode, "intact: kept as it is");

        type Damage = (&'static str, fn(&Path));
        let damages: [Damage; 5] = [
            ("truncated", |dir| std::fs::write(dir.join("glue/t.wasm"), [7; 10]).unwrap()),
            ("changed", |dir| std::fs::write(dir.join("glue/t.wasm"), [8; 100_000]).unwrap()),
            ("missing", |dir| std::fs::remove_file(dir.join("glue/t.wasm")).unwrap()),
            ("added", |dir| std::fs::write(dir.join("glue/extra"), b"x").unwrap()),
            ("not a directory", |dir| {
                std::fs::remove_dir_all(dir).unwrap();
                std::fs::write(dir, b"x").unwrap()
            }),
        ];
        for (what, damage) in damages {
            damage(&bundle.dir);
            assert!(difference(&bundle.dir, &bundle.dir).is_none(), "{what}: a tree equals itself");
            let (again, repaired) = store.put_bundle(&archive, 1 << 20).unwrap();
            assert_eq!((again, &repaired.dir), (hash.clone(), &bundle.dir), "{what}");
            assert_eq!(std::fs::read(&glue).unwrap(), [7; 100_000], "{what}: repaired");
            assert!(!bundle.dir.join("glue/extra").exists(), "{what}");
        }
        assert_eq!(std::fs::read_dir(store.tmp()).unwrap().count(), 0, "nothing left in tmp/");
    }

    #[test]
    fn a_single_gateway_removes_unnamed_bundles_on_start_and_a_shared_directory_keeps_them() {
        let state = tempfile::tempdir().unwrap();
        let store = Store::open(state.path()).unwrap();
        let (named, _) = store.put_bundle(&packed("x", b"x"), 1 << 20).unwrap();
        let (orphan, _) = store.put_bundle(&packed("y", b"y"), 1 << 20).unwrap();
        store
            .put_app(&AppRecord { name: "x".into(), bundle: named.clone(), deployed_at: 0, demand_windows: vec![] })
            .unwrap();
        drop(store);

        let shared = Store::open_shared(state.path(), "replica").unwrap();
        assert!(shared.bundles().join(&orphan).is_dir(), "a shared directory is never swept");
        drop(shared);
        let store = Store::open(state.path()).unwrap();
        assert!(store.bundles().join(&named).is_dir(), "a bundle an app names stays");
        assert!(!store.bundles().join(&orphan).exists(), "an unnamed bundle is removed");
        drop(store);

        // An unreadable record might name any bundle: then every bundle stays, and the gateway still starts.
        let store = Store::open(state.path()).unwrap();
        let (orphan, _) = store.put_bundle(&packed("y", b"y"), 1 << 20).unwrap();
        std::fs::write(store.apps().join("broken.json"), b"{").unwrap();
        drop(store);
        let store = Store::open(state.path()).unwrap();
        assert!(store.bundles().join(&orphan).is_dir() && store.bundles().join(&named).is_dir());
    }
}
