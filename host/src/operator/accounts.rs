//! Named operators: checking names and passwords, and hashing passwords
//! with argon2id before anything is stored.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use crate::store::{Account, Role, now};

/// Passwords shorter than this are refused: the console may face a network.
pub const MIN_PASSWORD_CHARS: usize = 12;
const MAX_PASSWORD_BYTES: usize = 1_024;
const MAX_NAME_CHARS: usize = 64;

/// Why an account cannot be made or changed.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error(
        "operator names are 1 to {MAX_NAME_CHARS} characters of a-z, 0-9, `.`, `_` and `-`, starting with a letter; got {0:?}"
    )]
    BadName(String),
    #[error("the password must be at least {MIN_PASSWORD_CHARS} characters")]
    ShortPassword,
    #[error("the password must be at most {MAX_PASSWORD_BYTES} bytes")]
    LongPassword,
    #[error("the OS random source failed: {0}")]
    Random(String),
    #[error("hashing the password failed: {0}")]
    Hash(String),
}

/// A name is shown in the console and in every record it decides, so it is
/// kept plain: lower-case ASCII, no look-alikes, no spaces.
pub fn check_name(name: &str) -> Result<(), AccountError> {
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_plain =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !starts_with_letter || !rest_plain || name.chars().count() > MAX_NAME_CHARS {
        return Err(AccountError::BadName(name.into()));
    }
    Ok(())
}

fn check_password(password: &str) -> Result<(), AccountError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AccountError::ShortPassword);
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(AccountError::LongPassword);
    }
    Ok(())
}

/// argon2id with OWASP's second recommended setting (19 MiB, 2 passes, one
/// lane): costly enough to slow a guesser holding a stolen hash, small
/// enough that the console checks two at a time without straining the host.
fn hasher() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).expect("constant argon2 parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// The PHC string of `password` under a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, AccountError> {
    check_password(password)?;
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| AccountError::Random(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| AccountError::Hash(e.to_string()))?;
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| AccountError::Hash(e.to_string()))
}

/// Whether `password` matches `account` (or, with no account, spends the
/// same time failing, so that a sign-in does not reveal which names exist).
pub fn verify_password(account: Option<&Account>, password: &str) -> bool {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let decoy =
        DECOY.get_or_init(|| hash_password("decoy password, never matches").unwrap_or_default());
    let stored = account.map_or(decoy.as_str(), |a| a.password_hash.as_str());
    let Ok(parsed) = PasswordHash::new(stored) else {
        return false;
    };
    let matched = password.len() <= MAX_PASSWORD_BYTES
        && hasher()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
    // The 19 MiB the check worked in would otherwise stay with the host.
    crate::heap::give_back_free_memory();
    matched && account.is_some()
}

/// A new account, checked and hashed.
pub fn new_account(
    name: &str,
    role: Role,
    password: &str,
    created_by: &str,
) -> Result<Account, AccountError> {
    check_name(name)?;
    Ok(Account {
        name: name.to_string(),
        role,
        password_hash: hash_password(password)?,
        created_at: now(),
        created_by: created_by.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        assert!(check_name("alice").is_ok());
        assert!(check_name("a.b_c-9").is_ok());
        for bad in [
            "",
            "Alice",
            "9lives",
            "al ice",
            "аlice",
            "a\u{202e}b",
            &"a".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn passwords_hash_and_verify() {
        assert!(matches!(
            hash_password("short"),
            Err(AccountError::ShortPassword)
        ));
        let account =
            new_account("alice", Role::Approver, "correct horse battery", "test").unwrap();
        assert!(
            account
                .password_hash
                .starts_with("$argon2id$v=19$m=19456,t=2,p=1$")
        );
        assert!(verify_password(Some(&account), "correct horse battery"));
        assert!(!verify_password(Some(&account), "correct horse batterY"));
        assert!(!verify_password(None, "decoy password, never matches"));
        let again = new_account("alice", Role::Approver, "correct horse battery", "test").unwrap();
        assert_ne!(account.password_hash, again.password_hash, "salts differ");
    }
}
