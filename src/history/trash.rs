//! The trash, over directory handles.
//!
//! A deleted object is moved by `renameat` from the handle of the directory that held it
//! (opened beneath the workspace root) to the handle of a trash's `files/` directory, and
//! back the same way on undo. No path string from the workspace reaches a syscall, and
//! nothing in the trash that an agent could edit (a `.trashinfo`) is ever read: undo
//! restores by the journal's record (name, device and inode, content hash).
//!
//! Two trashes:
//! - `home`: the freedesktop home trash (`$XDG_DATA_HOME/Trash`), so a person can see
//!   and restore deletions in their file manager; ferret writes the `.trashinfo` the
//!   spec asks for. Used only when it lies outside every root and on the same
//!   filesystem as the object (the spec's per-volume `.Trash-UID` directories are never
//!   used: on a mounted root they would lie inside the workspace).
//! - `os`: the operating system's trash behind a path API (macOS's Trash; a fake one
//!   under `FERRET_PORTABLE=1`, see `platform::OsTrash`). The object is first moved by
//!   handle into a staging directory ferret makes inside its own trash folder (so on the
//!   object's filesystem, or not used at all), and only that staged path, which no agent
//!   influenced, is handed to the OS; the journal then records where the OS put it.
//! - `ferret`: `trash/` in ferret's state directory, for everything else.

use super::journal::io_err;
use crate::error::ToolResult;
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Home,
    Ferret,
    /// The operating system's trash behind [`crate::platform::OsTrash`] (macOS's Trash;
    /// the fake one of `FERRET_PORTABLE=1`): the record names the directory the object
    /// ended up in and its name there.
    Os,
}

/// A trash directory, open.
pub struct Trash {
    pub kind: Kind,
    /// The trash directory itself.
    pub base: PathBuf,
    /// `files/`: where trashed objects live.
    pub files: Dir,
    /// `info/` (home trash only).
    info: Option<Dir>,
    /// The device `files/` is on: a rename can only stay on one.
    pub dev: u64,
}

/// The freedesktop home trash directory, from the environment (never from a workspace).
pub fn home_trash_path() -> Option<PathBuf> {
    crate::platform::home_trash(&crate::platform::process_env)
}

fn open_dir_create(parent: &Dir, name: &str) -> std::io::Result<Dir> {
    match parent.create_dir(name) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let d = cap_fs_ext::DirExt::open_dir_nofollow(parent, name)?;
    #[cfg(unix)]
    {
        let _ = rustix::fs::fchmod(&d, Mode::from_raw_mode(0o700));
    }
    Ok(d)
}

impl Trash {
    /// The home trash, created if need be; `None` when there is none to use (no HOME,
    /// not creatable, or `inside_roots` says it lies in the workspace).
    pub fn home(inside_roots: impl Fn(&Path) -> bool) -> Option<Trash> {
        let path = home_trash_path()?;
        std::fs::create_dir_all(&path).ok()?;
        let canon = std::fs::canonicalize(&path).ok()?;
        if inside_roots(&canon) {
            return None;
        }
        Trash::home_at(&canon)
    }

    /// A home trash by its directory (as a journal entry recorded it), so an undo finds
    /// the trash the delete used even if the environment changed since.
    pub fn home_at(base: &Path) -> Option<Trash> {
        let dir = Dir::open_ambient_dir(base, cap_std::ambient_authority()).ok()?;
        let files = open_dir_create(&dir, "files").ok()?;
        let info = open_dir_create(&dir, "info").ok()?;
        let dev = crate::platform::file_id(&rustix::fs::fstat(&files).ok()?).0;
        Some(Trash {
            kind: Kind::Home,
            base: base.to_path_buf(),
            files,
            info: Some(info),
            dev,
        })
    }

    /// The directory an OS trash put an object in (or the staging directory it was
    /// being put from), as the journal recorded it: opened without following a link in
    /// its last name. Nothing in it is trusted: a restore checks the object's identity.
    pub fn os_at(base: &Path) -> Option<Trash> {
        let fd = rustix::fs::open(
            base,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let dev = crate::platform::file_id(&rustix::fs::fstat(&fd).ok()?).0;
        Some(Trash {
            kind: Kind::Os,
            base: base.to_path_buf(),
            files: Dir::from_std_file(std::fs::File::from(fd)),
            info: None,
            dev,
        })
    }

    /// ferret's own trash in the state directory.
    pub fn ferret(state: &Path) -> ToolResult<Trash> {
        let base = Dir::open_ambient_dir(state, cap_std::ambient_authority())
            .map_err(|e| io_err("state directory", &e))?;
        let files = open_dir_create(&base, "trash").map_err(|e| io_err("trash folder", &e))?;
        let dev = crate::platform::file_id(
            &rustix::fs::fstat(&files).map_err(|e| io_err("trash folder", &e.into()))?,
        )
        .0;
        Ok(Trash {
            kind: Kind::Ferret,
            base: state.to_path_buf(),
            files,
            info: None,
            dev,
        })
    }

    /// The `n`th name (from 1) to try for `original` (its file name), or `None` when that
    /// one is in use. The home trash uses the name itself, then `name.2`, ...; ferret's
    /// trash makes it unique with the change's stamp. A name is only taken by
    /// [`Trash::claim`], after the journal records it: a process killed in between
    /// leaves a `.trashinfo` that recovery knows to be its own.
    ///
    /// Every name fits a file name's limit (255 bytes), with the home trash's
    /// `.trashinfo` and ferret's stamp: a longer one is shortened by [`fit_name`] (the
    /// original path, which undo does not need, stays whole in the `.trashinfo`).
    pub fn candidate(&self, original: &OsStr, stamp: &str, n: u32) -> Option<String> {
        let base = original
            .to_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("item")
            .to_string();
        let Some(info) = &self.info else {
            let base = fit_name(&base, STAMPED_NAME_MAX);
            return Some(if n == 1 {
                format!("{stamp}_{base}")
            } else {
                format!("{stamp}_{n}_{base}")
            });
        };
        let name = if n == 1 { base } else { format!("{base}.{n}") };
        let name = fit_name(&name, NAME_MAX - TRASHINFO.len());
        let used = |d: &Dir, n: &str| rustix::fs::statat(d, n, AtFlags::SYMLINK_NOFOLLOW).is_ok();
        (!used(&self.files, &name) && !used(info, &format!("{name}.trashinfo"))).then_some(name)
    }

    /// Takes `name` for `abs_original`: the home trash creates its `.trashinfo`
    /// exclusively, as the spec says (`Ok(false)`: another process took it first).
    pub fn claim(&self, name: &str, abs_original: &Path) -> ToolResult<bool> {
        let Some(info) = &self.info else {
            return Ok(true);
        };
        let body = format!(
            "[Trash Info]\nPath={}\nDeletionDate={}\n",
            percent_encode(abs_original),
            deletion_date()
        );
        match rustix::fs::openat(
            info,
            format!("{name}{TRASHINFO}").as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => {
                let mut f = std::fs::File::from(fd);
                if let Err(e) = f.write_all(body.as_bytes()).and_then(|()| f.sync_all()) {
                    // Made by this call (exclusively): a full disk left it empty or cut,
                    // naming nothing recovery could know as ours, and it would stay in
                    // the person's trash for good (round 30).
                    drop(f);
                    let _ = rustix::fs::unlinkat(
                        info,
                        format!("{name}{TRASHINFO}").as_str(),
                        AtFlags::empty(),
                    );
                    return Err(io_err("trash info", &e));
                }
                Ok(true)
            }
            Err(e) if e == rustix::io::Errno::EXIST => Ok(false),
            Err(e) => Err(io_err("trash info", &e.into())),
        }
    }

    /// Recovery of a delete whose process died before its object reached `files/`:
    /// drops `name.trashinfo` if it is what that change wrote (a regular file naming
    /// `abs_original`) and `files/` holds nothing by that name. Anything else is left.
    pub fn forget_orphan(&self, name: &str, abs_original: &Path) {
        let Some(info) = &self.info else {
            return;
        };
        if rustix::fs::statat(&self.files, name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            return;
        }
        let file = format!("{name}.trashinfo");
        let Ok(fd) = rustix::fs::openat(
            info,
            file.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        let regular = rustix::fs::fstat(&fd)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file());
        if !regular {
            return;
        }
        let mut body = Vec::new();
        let _ = std::io::Read::read_to_end(
            &mut std::io::Read::take(std::fs::File::from(fd), 64 * 1024),
            &mut body,
        );
        let want = format!("\nPath={}\n", percent_encode(abs_original));
        if String::from_utf8_lossy(&body).contains(&want) {
            let _ = rustix::fs::unlinkat(info, file.as_str(), AtFlags::empty());
        }
    }

    /// Drops the `.trashinfo` of `name` (after a restore, or when a move did not happen).
    pub fn forget(&self, name: &str) {
        if let Some(info) = &self.info {
            let _ =
                rustix::fs::unlinkat(info, format!("{name}.trashinfo").as_str(), AtFlags::empty());
        }
    }
}

/// The longest file name (bytes) the systems ferret runs on take.
const NAME_MAX: usize = 255;
const TRASHINFO: &str = ".trashinfo";
/// The longest original name kept whole after a stamp (`STAMP_name`, `STAMP_N_name`):
/// a stamp with its separators takes at most 75 bytes.
pub(super) const STAMPED_NAME_MAX: usize = NAME_MAX - 75;

/// `name` if it is at most `max` bytes; else a prefix of it, `~`, eight hex digits of
/// its hash (two long names sharing a prefix stay apart), and its extension when that
/// is short: at most `max` bytes, cut on a character boundary. The same name always
/// gives the same result.
pub(super) fn fit_name(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    use sha2::Digest;
    let tag = format!(
        "~{}",
        &hex::encode(sha2::Sha256::digest(name.as_bytes()))[..8]
    );
    let ext = match name.rfind('.') {
        Some(i) if i > 0 && name.len() - i <= 16 => &name[i..],
        _ => "",
    };
    let mut cut = max.saturating_sub(tag.len() + ext.len());
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{tag}{ext}", &name[..cut])
}

/// The spec's `DeletionDate`: local time, `YYYY-MM-DDThh:mm:ss`; UTC here (no time-zone
/// database is consulted), which file managers show as is.
fn deletion_date() -> String {
    let s = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    s.trim_end_matches('Z').to_string()
}

/// RFC 2396 escaping of a path for `Path=`, as the spec requires.
fn percent_encode(p: &Path) -> String {
    let mut out = String::new();
    for &b in p.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
