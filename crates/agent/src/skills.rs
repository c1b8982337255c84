//! Skills: `SKILL.md` files (YAML frontmatter with `name` and
//! `description`, then instructions) in a `skills/` directory of the suite
//! or the workspace, one directory per skill. Only the names and
//! descriptions go into the system prompt; the `read_skill` tool loads a
//! body when the agent decides a skill applies, so a long library of skills
//! costs a line each until used.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// Bytes of a `SKILL.md` read; far more than any skill's instructions.
const SKILL_LIMIT: u64 = 256 * 1024;

/// Skills one directory may hold: tack reads them all itself, and a
/// workspace's are the agent's or the task's to write.
const SKILLS_LIMIT: usize = 256;

/// Bytes of frontmatter read; a skill's header is a few lines.
const DESCRIPTION_LIMIT: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The instructions after the frontmatter.
    pub body: String,
    pub path: PathBuf,
}

/// A `SKILL.md` that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", path.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct SkillError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

#[derive(Deserialize)]
struct Frontmatter {
    name: String,
    description: String,
}

/// The skills below each of `dirs` (`<dir>/<skill>/SKILL.md`), sorted by
/// name; a directory that does not exist has none. Two skills of one name
/// are an error: the agent could not tell them apart.
pub fn load_skills(dirs: &[PathBuf]) -> Result<Vec<Skill>, SkillError> {
    let mut skills: Vec<Skill> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        // A skill is a directory, not a link to one: the files are read by
        // tack itself, outside the sandbox (the workspace's skills are the
        // agent's or the task's to write).
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| {
                let entry = e.ok()?;
                entry
                    .file_type()
                    .ok()?
                    .is_dir()
                    .then(|| entry.path().join(SKILL_FILE))
            })
            .filter(|p| p.symlink_metadata().is_ok())
            .collect();
        files.sort();
        if files.len() > SKILLS_LIMIT {
            return Err(SkillError {
                path: dir.clone(),
                line: None,
                message: format!(
                    "holds {} skills, more than the {SKILLS_LIMIT} tack reads; keep the ones the \
                     agent needs",
                    files.len()
                ),
            });
        }
        for file in files {
            let skill = parse_skill(&file, read_skill_file(dir, &file)?)?;
            if let Some(other) = skills.iter().find(|s| s.name == skill.name) {
                return Err(SkillError {
                    path: file,
                    line: None,
                    message: format!(
                        "a skill named `{}` is already defined in {}; give each skill its own name",
                        skill.name,
                        other.path.display()
                    ),
                });
            }
            skills.push(skill);
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

/// `file`, a SKILL.md in `dir`, read as the file tools read it beneath the
/// directory that holds `dir` (the workspace, the suite): tack reads it
/// outside the sandbox, and a workspace's skills are the agent's or the
/// task's to write. A link within is followed, one out of it refused.
fn read_skill_file(dir: &Path, file: &Path) -> Result<String, SkillError> {
    let error = |message: String| SkillError {
        path: file.to_path_buf(),
        line: None,
        message,
    };
    let root = dir.parent().unwrap_or(dir);
    let relative = file
        .strip_prefix(root)
        .map_err(|_| error("is not below its skills directory".to_string()))?
        .to_string_lossy();
    match tack_sandbox::read_beneath(root, &relative, SKILL_LIMIT) {
        Ok(Some(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Ok(None) => Err(error("no such file".to_string())),
        Err(refused) => Err(error(refused.to_string())),
    }
}

fn parse_skill(path: &Path, text: String) -> Result<Skill, SkillError> {
    let error = |line: Option<usize>, message: String| SkillError {
        path: path.to_path_buf(),
        line,
        message,
    };
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| {
            error(
                Some(1),
                "a SKILL.md starts with YAML frontmatter: `---`, then `name:` and `description:`, then `---`".into(),
            )
        })?;
    let (header, body) = split_frontmatter(rest).ok_or_else(|| {
        error(
            None,
            "the frontmatter has no closing `---` line".to_string(),
        )
    })?;
    let front: Frontmatter = serde_norway::from_str(header).map_err(|e| {
        // The frontmatter starts on the file's second line.
        let line = e.location().map(|l| l.line() + 1);
        error(line, format!("frontmatter: {e}"))
    })?;
    let name = front.name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(error(
            Some(2),
            format!("name `{name}`: use lowercase letters, digits and hyphens, e.g. `pdf-forms`"),
        ));
    }
    let description = front.description.trim();
    if description.is_empty() || description.len() > DESCRIPTION_LIMIT {
        return Err(error(
            None,
            format!(
                "description: say in one to {DESCRIPTION_LIMIT} bytes what the skill does and when to use it"
            ),
        ));
    }
    Ok(Skill {
        name: name.to_string(),
        description: description.split_whitespace().collect::<Vec<_>>().join(" "),
        body: body.trim_start_matches(['\r', '\n']).to_string(),
        path: path.to_path_buf(),
    })
}

/// The frontmatter (after the opening `---`) and the body after the
/// closing `---` line.
fn split_frontmatter(rest: &str) -> Option<(&str, &str)> {
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// What the system prompt says about the skills: a line each.
pub fn skills_listing(skills: &[Skill]) -> String {
    let mut text = String::from(
        "\n\nSkills: instructions for particular jobs, loaded with the read_skill tool when one applies to the task. Available skills:",
    );
    for skill in skills {
        text.push_str(&format!("\n- {}: {}", skill.name, skill.description));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join(SKILL_FILE), text).unwrap();
    }

    /// Skills are read by tack itself, outside the sandbox: a skill that is
    /// a link to a directory elsewhere is not one, and a SKILL.md that is a
    /// link out (to a key, say) is refused, not read; one within is read.
    #[test]
    fn links_are_not_followed_out_of_the_skills_directory() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let elsewhere = outside.path().join("elsewhere");
        write(
            &elsewhere,
            "keys",
            "---\nname: keys\ndescription: secret\n---\nKEY\n",
        );
        let root = dir.path().join("skills");
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("keys"), root.join("keys")).unwrap();
        assert!(load_skills(std::slice::from_ref(&root)).unwrap().is_empty());

        std::fs::create_dir_all(root.join("linked")).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join("keys").join(SKILL_FILE),
            root.join("linked").join(SKILL_FILE),
        )
        .unwrap();
        let error = load_skills(std::slice::from_ref(&root)).unwrap_err();
        assert!(
            error.to_string().contains("outside the workspace"),
            "{error}"
        );
        assert!(!error.to_string().contains("KEY"), "{error}");

        // A link that stays beneath the directory holding skills/ is read.
        std::fs::remove_dir_all(root.join("linked")).unwrap();
        std::fs::write(
            dir.path().join("shared.md"),
            "---\nname: shared\ndescription: kept elsewhere\n---\nbody\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("shared")).unwrap();
        std::os::unix::fs::symlink("../../shared.md", root.join("shared").join(SKILL_FILE))
            .unwrap();
        let skills = load_skills(std::slice::from_ref(&root)).unwrap();
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].name, "shared");
    }

    #[test]
    fn loads_name_description_and_body_and_names_the_line_of_a_bad_header() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        write(
            &root,
            "csv",
            "---\nname: csv-fixes\ndescription: >\n  Fixing CSV parsers:\n  headers and quoting.\nlicense: MIT\n---\n\n# CSV\nCount the header once.\n",
        );
        let skills = load_skills(&[root.clone(), dir.path().join("missing")]).unwrap();
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].name, "csv-fixes");
        assert_eq!(
            skills[0].description,
            "Fixing CSV parsers: headers and quoting."
        );
        assert_eq!(skills[0].body, "# CSV\nCount the header once.\n");
        assert!(skills_listing(&skills).contains("\n- csv-fixes: Fixing CSV parsers"));

        write(
            &root,
            "bad",
            "---\nname: bad\ndescription: [unclosed\n---\nbody\n",
        );
        let error = load_skills(std::slice::from_ref(&root)).unwrap_err();
        assert!(error.path.ends_with("bad/SKILL.md"), "{error}");
        assert_eq!(error.line, Some(3), "{error}");

        write(&root, "bad", "no frontmatter\n");
        let error = load_skills(std::slice::from_ref(&root)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("line 1: a SKILL.md starts with YAML frontmatter")
        );

        write(
            &root,
            "bad",
            "---\nname: csv-fixes\ndescription: again\n---\n",
        );
        let error = load_skills(&[root]).unwrap_err();
        assert!(error.to_string().contains("already defined"), "{error}");
    }
}
