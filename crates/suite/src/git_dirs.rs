//! The git repository a suite sits in: its objects hold the suite's hidden
//! checks and solutions as much as `tasks/` does.

use std::path::{Path, PathBuf};

/// The git directories of the repository `dir` is in, if any: its `.git`,
/// or for a worktree or submodule (whose `.git` is a file naming it) the
/// directory named and the repository's common one.
pub(crate) fn git_dirs_holding(dir: &Path) -> Vec<PathBuf> {
    let Some(dot_git) = dir.ancestors().map(|d| d.join(".git")).find(|g| g.exists()) else {
        return Vec::new();
    };
    if dot_git.is_dir() {
        return dot_git.canonicalize().into_iter().collect();
    }
    let Some(named) = std::fs::read_to_string(&dot_git)
        .ok()
        .and_then(|text| Some(text.strip_prefix("gitdir:")?.trim().to_string()))
    else {
        return Vec::new();
    };
    let holder = dot_git.parent().unwrap_or(Path::new("/"));
    let Ok(git_dir) = holder.join(named).canonicalize() else {
        return Vec::new();
    };
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .and_then(|text| git_dir.join(text.trim()).canonicalize().ok());
    std::iter::once(git_dir)
        .chain(common)
        .filter(|d| d.is_dir())
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::git_dirs_holding;

    /// The suite's repository holds its hidden checks in its objects.
    #[test]
    fn the_repository_holding_a_suite_is_found_worktrees_too() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(repo.join("suites/demo")).unwrap();
        let git = repo.join(".git").canonicalize().unwrap();
        assert_eq!(
            git_dirs_holding(&repo.join("suites/demo")),
            std::slice::from_ref(&git)
        );

        let worktree = dir.path().join("wt");
        std::fs::create_dir_all(worktree.join("suite")).unwrap();
        std::fs::write(
            worktree.join(".git"),
            format!("gitdir: {}\n", repo.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        std::fs::write(repo.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let named = git.join("worktrees/wt");
        assert_eq!(git_dirs_holding(&worktree.join("suite")), [named, git]);

        let alone = dir.path().join("alone");
        std::fs::create_dir(&alone).unwrap();
        // tempdirs sit in no repository.
        assert!(
            git_dirs_holding(&alone)
                .iter()
                .all(|d| !d.starts_with(dir.path()))
        );
    }
}
