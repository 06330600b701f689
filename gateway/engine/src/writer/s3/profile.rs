//! Static credentials from AWS's shared files (`~/.aws/credentials` and
//! `~/.aws/config`), which object_store does not read: the profile
//! `AWS_PROFILE` names (`default` when unset), as AWS's tools look it up
//! after the environment's keys and before a web-identity token. A profile
//! that gets its credentials some other way (a role to assume, a process,
//! SSO) is refused by its key: this build cannot honour it, and falling
//! through to the next provider would sign as somebody else.

use std::path::{Path, PathBuf};

use ini::{Ini, ParseOption};

use crate::{Error, Result, Status};

/// The keys a profile's static credentials are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ProfileCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

/// Profile keys that name another way to get credentials.
const OTHER_PROVIDERS: &[&str] =
    &["role_arn", "credential_process", "sso_session", "sso_start_url", "web_identity_token_file", "credential_source"];

/// The credentials of the process's profile, read through `var` (the
/// environment, or a test's); none where the environment has keys of its
/// own or the default profile is absent or has no keys.
pub(super) fn profile_credentials(var: impl Fn(&str) -> Option<String>) -> Result<Option<ProfileCredentials>> {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    if set("AWS_ACCESS_KEY_ID").is_some() {
        return Ok(None);
    }
    let named = set("AWS_PROFILE");
    let profile = named.clone().unwrap_or_else(|| "default".to_owned());
    let home = set("HOME").map(PathBuf::from);
    let file = |variable: &str, name: &str| {
        set(variable).map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let credentials_file = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config_file = file("AWS_CONFIG_FILE", "config");
    // The credentials file's section is the profile's name; the config
    // file's is `profile <name>` (`default` stays `default`).
    let config_section = if profile == "default" { profile.clone() } else { format!("profile {profile}") };
    let sections = [(credentials_file, profile.clone()), (config_file, config_section)];
    let mut found = Vec::new();
    for (path, section) in sections.iter().filter_map(|(path, section)| Some((path.as_ref()?, section))) {
        if let Some(keys) = read_section(path, section)? {
            found.push((path, keys));
        }
    }
    if found.is_empty() {
        if named.is_some() {
            let looked: Vec<String> =
                sections.iter().filter_map(|(p, _)| Some(p.as_ref()?.display().to_string())).collect();
            return Err(Error::invalid(format!("AWS_PROFILE={profile}: no such profile in {}", looked.join(" or "))));
        }
        return Ok(None);
    }
    // The credentials file's keys come first, as in AWS's tools.
    let key = |name: &str| found.iter().find_map(|(path, keys)| Some((*path, keys.get(name)?.clone())));
    match (key("aws_access_key_id"), key("aws_secret_access_key")) {
        (Some((_, access_key_id)), Some((_, secret_access_key))) => Ok(Some(ProfileCredentials {
            access_key_id,
            secret_access_key,
            session_token: key("aws_session_token").map(|(_, token)| token),
        })),
        (Some((path, _)), None) | (None, Some((path, _))) => Err(Error::invalid(format!(
            "AWS profile {profile} in {}: aws_access_key_id and aws_secret_access_key go together, one is missing",
            path.display()
        ))),
        (None, None) => match OTHER_PROVIDERS.iter().find_map(|name| Some((key(name)?.0, name))) {
            Some((path, name)) => Err(Error::new(
                Status::NotSupported,
                format!(
                    "AWS profile {profile} in {}: {name} is not supported by this build's S3 client; give the profile static keys, or the environment AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a web-identity token",
                    path.display()
                ),
            )),
            None => Ok(None),
        },
    }
}

/// The keys of `section` in the INI file at `path`; none where the file or
/// the section is absent.
fn read_section(path: &Path, section: &str) -> Result<Option<std::collections::HashMap<String, String>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(Status::InvalidParameter, format!("cannot read {}", path.display()), e)),
    };
    // AWS's files nest settings under a key by indenting them (`s3 =` then
    // `  max_concurrent_requests = 10`), and take backslashes literally.
    let options =
        ParseOption { enabled_escape: false, enabled_indented_mutiline_value: true, ..ParseOption::default() };
    let ini = Ini::load_from_str_opt(&text, options)
        .map_err(|e| Error::invalid(format!("{} is not an AWS config file: {e}", path.display())))?;
    Ok(ini.section(Some(section)).map(|keys| keys.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files in a scratch home, and an environment of `vars` with that HOME.
    fn home(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(".aws").join(name), text).unwrap();
        }
        dir
    }

    fn read(dir: &tempfile::TempDir, vars: &[(&str, &str)]) -> Result<Option<ProfileCredentials>> {
        let home = dir.path().to_str().unwrap().to_owned();
        profile_credentials(|name| {
            if name == "HOME" {
                return Some(home.clone());
            }
            vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        })
    }

    fn keys(access: &str, secret: &str, token: Option<&str>) -> Option<ProfileCredentials> {
        Some(ProfileCredentials {
            access_key_id: access.into(),
            secret_access_key: secret.into(),
            session_token: token.map(Into::into),
        })
    }

    const FILES: &[(&str, &str)] = &[
        (
            "credentials",
            "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = s/ecret\\def\n\n# a lab account\n[lab]\naws_access_key_id=AKLAB\naws_secret_access_key=lab\naws_session_token = tok\n",
        ),
        (
            "config",
            "[default]\nregion = eu-west-1\ns3 =\n  max_concurrent_requests = 10\n[profile cfgonly]\naws_access_key_id = AKCFG\naws_secret_access_key = cfg\n[profile assume]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n[profile half]\naws_access_key_id = AKHALF\n",
        ),
    ];

    #[test]
    fn the_default_profile_and_a_named_one_are_read_from_either_file() {
        let dir = home(FILES);
        assert_eq!(read(&dir, &[]).unwrap(), keys("AKDEF", "s/ecret\\def", None));
        assert_eq!(read(&dir, &[("AWS_PROFILE", "lab")]).unwrap(), keys("AKLAB", "lab", Some("tok")));
        assert_eq!(read(&dir, &[("AWS_PROFILE", "cfgonly")]).unwrap(), keys("AKCFG", "cfg", None));
    }

    #[test]
    fn keys_in_the_environment_win_and_absent_files_or_keys_give_none() {
        let dir = home(FILES);
        assert_eq!(read(&dir, &[("AWS_ACCESS_KEY_ID", "AKENV"), ("AWS_PROFILE", "nosuch")]).unwrap(), None);
        assert_eq!(read(&home(&[]), &[]).unwrap(), None);
        assert_eq!(read(&home(&[("config", "[default]\nregion = us-east-2\n")]), &[]).unwrap(), None);
    }

    #[test]
    fn files_named_by_the_environment_replace_the_homes() {
        let dir = home(FILES);
        let other = dir.path().join("other");
        std::fs::write(&other, "[lab]\naws_access_key_id = AKOTHER\naws_secret_access_key = o\n").unwrap();
        let vars = [("AWS_PROFILE", "lab"), ("AWS_SHARED_CREDENTIALS_FILE", other.to_str().unwrap())];
        assert_eq!(read(&dir, &vars).unwrap(), keys("AKOTHER", "o", None));
    }

    #[test]
    fn a_missing_named_profile_half_keys_or_another_provider_are_refused_by_name() {
        let dir = home(FILES);
        let message = |vars: &[(&str, &str)]| read(&dir, vars).unwrap_err().message;
        let missing = message(&[("AWS_PROFILE", "nosuch")]);
        assert!(missing.contains("AWS_PROFILE=nosuch") && missing.contains(".aws/credentials"), "{missing}");
        assert!(message(&[("AWS_PROFILE", "half")]).contains("aws_secret_access_key"));
        let assume = read(&dir, &[("AWS_PROFILE", "assume")]).unwrap_err();
        assert_eq!(assume.status, Status::NotSupported);
        assert!(assume.message.contains("role_arn"), "{}", assume.message);
        let broken = home(&[("credentials", "[default\naws_access_key_id = x\n")]);
        assert!(read(&broken, &[]).unwrap_err().message.contains("not an AWS config file"));
    }
}
