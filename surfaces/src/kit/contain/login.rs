//! What runs code at the person's next login, terminal or desktop session, and so is read-only
//! in every run unless the person's config names it: shell rc and profile files, autostart and
//! desktop entries, systemd user units, `environment.d`, ssh's `authorized_keys` and `rc`, cron,
//! and the machine's own such places (a root daemon's runs are root, who owns them).

use std::path::{Path, PathBuf};

/// Under the home directory (`true`: a directory whose entries do).
const HOME_LOGIN_FILES: &[(&str, bool)] = &[
    (".bashrc", false),
    (".bash_profile", false),
    (".bash_login", false),
    (".bash_logout", false),
    (".profile", false),
    (".zshrc", false),
    (".zprofile", false),
    (".zshenv", false),
    (".zlogin", false),
    (".zlogout", false),
    (".xprofile", false),
    (".xsessionrc", false),
    (".xinitrc", false),
    (".xsession", false),
    (".pam_environment", false),
    (".ssh/authorized_keys", false),
    (".ssh/authorized_keys2", false),
    (".ssh/rc", false),
    (".ssh/environment", false),
    (".config/fish", true),
    (".config/autostart", true),
    (".config/systemd/user", true),
    (".local/share/systemd/user", true),
    (".local/share/applications", true),
    (".config/environment.d", true),
];

/// The machine's own: every login reads them; root owns them, so a root daemon's runs (root
/// without capabilities) could write them, and a crontab is installed by writing
/// `/var/spool/cron`.
const SYSTEM_LOGIN_FILES: &[&str] = &[
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/bash.bash_logout",
    "/etc/zsh",
    "/etc/zshrc",
    "/etc/zprofile",
    "/etc/environment",
    "/etc/environment.d",
    "/etc/security/pam_env.conf",
    "/etc/xdg/autostart",
    "/etc/X11/Xsession.d",
    "/etc/systemd",
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/var/spool/cron",
    "/etc/ssh",
    "/etc/sudoers",
    "/etc/sudoers.d",
];

/// What runs find read-only: the login files of `home` and of the machine, except those the
/// person's config names in `writable` (as given there; `~/` stands for `home`). Nothing is made
/// on disk: see [`login_files`] for the list runs are given.
pub fn login_paths(home: Option<&Path>, writable: &[PathBuf]) -> Vec<PathBuf> {
    listed(home, writable)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// [`login_paths`], with every listed directory of `home` that does not exist yet made, empty
/// (0700): a name can be covered by a mount only where it exists, and nothing stops a file
/// being created in a directory that is missing except making its parent read-only
/// (`~/.config`: every other program's settings with it) or covering the parent with an empty
/// one (hiding them). An empty autostart, systemd or applications directory means the same to
/// every reader as a missing one. Files are never made: an empty `~/.bash_profile` would stop
/// bash reading `~/.profile`. So a login file that does not exist yet can still be created by a
/// run.
pub fn login_files(home: Option<&Path>, writable: &[PathBuf]) -> Vec<PathBuf> {
    let listed = listed(home, writable);
    for (path, is_dir) in &listed {
        if *is_dir && std::fs::symlink_metadata(path).is_err() {
            use std::os::unix::fs::DirBuilderExt;
            if let Err(err) = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
            {
                tracing::warn!(path = %path.display(), error = %err,
                    "cannot make an empty login directory to cover in runs; runs may create it");
            }
        }
    }
    listed.into_iter().map(|(path, _)| path).collect()
}

/// The login files, each with whether it is a home directory that may need making.
fn listed(home: Option<&Path>, writable: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    let expand = |path: &Path| -> PathBuf {
        match (path.strip_prefix("~"), home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => path.to_path_buf(),
        }
    };
    let lifted: Vec<PathBuf> = writable.iter().map(|p| expand(p)).collect();
    let is_lifted = |path: &Path| lifted.iter().any(|l| l == path);
    let mut out = Vec::new();
    // A home that is no directory is never made: runs then start in `/`, and nothing of a
    // home that does not exist can run at a login.
    if let Some(home) = home.filter(|h| h.is_absolute() && *h != Path::new("/") && h.is_dir()) {
        for (relative, is_dir) in HOME_LOGIN_FILES {
            let path = home.join(relative);
            if !is_lifted(&path) {
                out.push((path, *is_dir));
            }
        }
    }
    out.extend(
        SYSTEM_LOGIN_FILES
            .iter()
            .map(PathBuf::from)
            .filter(|path| !is_lifted(path))
            .map(|path| (path, false)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_the_config_names_is_left_writable() {
        let home = tempfile::tempdir().unwrap();
        let all = login_files(Some(home.path()), &[]);
        assert!(all.contains(&home.path().join(".bashrc")));
        assert!(all.contains(&PathBuf::from("/var/spool/cron")));
        assert!(home.path().join(".config/autostart").is_dir());
        assert!(!home.path().join(".bash_profile").exists());
        let other = tempfile::tempdir().unwrap();
        assert_eq!(
            login_paths(Some(other.path()), &[]).len(),
            all.len(),
            "the same list"
        );
        assert!(
            !other.path().join(".config").exists(),
            "login_paths makes nothing"
        );
        let lifted = login_files(
            Some(home.path()),
            &[PathBuf::from("~/.bashrc"), PathBuf::from("/var/spool/cron")],
        );
        assert!(!lifted.contains(&home.path().join(".bashrc")));
        assert!(!lifted.contains(&PathBuf::from("/var/spool/cron")));
        assert!(lifted.contains(&home.path().join(".profile")));
    }
}
