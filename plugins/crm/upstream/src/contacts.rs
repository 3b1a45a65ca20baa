//! The contact records and the rules for reading and changing them.

use serde::{Deserialize, Serialize};

/// Longest search text, in characters.
pub const MAX_QUERY_CHARS: usize = 100;
/// Most contacts one search returns.
pub const MAX_LIMIT: usize = 50;
/// Search results when the client names no limit.
pub const DEFAULT_LIMIT: usize = 10;
/// Longest value of a changeable field, in characters.
pub const MAX_FIELD_CHARS: usize = 200;

/// One person in the CRM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Contact {
    /// Stable id, `c_` plus digits; never reused.
    pub id: String,
    /// Full display name.
    pub name: String,
    /// E-mail address.
    pub email: String,
    /// Phone number, formatted for people.
    pub phone: String,
    /// Postal address on one line.
    pub address: String,
}

/// (name, email, phone, address). Names, domains and numbers are fictional:
/// `.example` is reserved, and 555-01xx numbers are set aside for fiction.
/// Two Bergers and a Bergmann make "berg" a search with several hits.
const SEED: [(&str, &str, &str, &str); 12] = [
    (
        "Amelia Hartmann",
        "amelia.hartmann@hartmann-bau.example",
        "+1 206 555 0101",
        "14 Harbour Lane, Port Simhaven 20457",
    ),
    (
        "Jonas Berger",
        "jonas.berger@example.org",
        "+1 206 555 0102",
        "3 Mill Street, Eastbrook 20311",
    ),
    (
        "Lea Berger",
        "lea.berger@nordlicht-studio.example",
        "+1 206 555 0103",
        "3 Mill Street, Eastbrook 20311",
    ),
    (
        "Tomasz Wrona",
        "t.wrona@example.com",
        "+1 312 555 0104",
        "88 Quarry Road, Westfield 60614",
    ),
    (
        "Priya Raman",
        "priya.raman@example.net",
        "+1 312 555 0105",
        "210 Orchard Avenue, Apt 4B, Westfield 60618",
    ),
    (
        "Kwame Mensah",
        "kwame@mensah-logistics.example",
        "+1 415 555 0106",
        "Unit 7, Dockside Park, Saltmere 94107",
    ),
    (
        "Sofia Marchetti",
        "sofia@marchetti-design.example",
        "+1 415 555 0107",
        "51 Linden Court, Saltmere 94110",
    ),
    (
        "Henrik Bergmann",
        "h.bergmann@example.org",
        "+1 617 555 0108",
        "9 Beacon Row, Northwick 02116",
    ),
    (
        "Yuki Tanaka",
        "yuki.tanaka@example.com",
        "+1 617 555 0109",
        "120 Canal Street, Northwick 02114",
    ),
    (
        "Olivia Brennan",
        "olivia.brennan@brennan-law.example",
        "+1 718 555 0110",
        "400 Riverside Drive, Suite 12, Kingsford 11201",
    ),
    (
        "Mateo Alvarez",
        "mateo.alvarez@example.net",
        "+1 718 555 0111",
        "27 Cedar Lane, Kingsford 11215",
    ),
    (
        "Fatima El Idrissi",
        "fatima.elidrissi@example.com",
        "+1 503 555 0112",
        "6 Windmill Close, Ashby 97205",
    ),
];

/// The contacts the server starts with, ids `c_1001` to `c_1012`.
pub fn seed() -> Vec<Contact> {
    SEED.iter()
        .zip(1001..)
        .map(|(&(name, email, phone, address), n)| Contact {
            id: format!("c_{n}"),
            name: name.into(),
            email: email.into(),
            phone: phone.into(),
            address: address.into(),
        })
        .collect()
}

/// Checks the search text and returns it lower-cased for matching.
pub fn check_query(q: Option<&str>) -> Result<String, String> {
    let q = q.ok_or("q is required: the text to look for in names and e-mail addresses")?;
    if q.trim().is_empty() || q.chars().count() > MAX_QUERY_CHARS {
        return Err(format!(
            "q must have 1 to {MAX_QUERY_CHARS} characters and not be blank"
        ));
    }
    Ok(q.to_lowercase())
}

/// Parses `limit`, defaulting when absent.
pub fn check_limit(limit: Option<&str>) -> Result<usize, String> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(format!("limit must be an integer from 1 to {MAX_LIMIT}")),
        },
    }
}

/// Whether `contact` matches the lower-cased search text.
pub fn matches(contact: &Contact, needle: &str) -> bool {
    contact.name.to_lowercase().contains(needle) || contact.email.to_lowercase().contains(needle)
}

/// The body of a PATCH: the fields to replace.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContactPatch {
    /// New postal address.
    pub address: Option<String>,
    /// New phone number.
    pub phone: Option<String>,
    /// New e-mail address.
    pub email: Option<String>,
}

impl ContactPatch {
    /// Rejects an empty patch and values the CRM would not store.
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("address", &self.address),
            ("phone", &self.phone),
            ("email", &self.email),
        ];
        if fields.iter().all(|(_, v)| v.is_none()) {
            return Err("give at least one of address, phone, email".into());
        }
        for (name, value) in fields {
            if let Some(value) = value
                && (value.trim().is_empty() || value.chars().count() > MAX_FIELD_CHARS)
            {
                return Err(format!(
                    "{name} must have 1 to {MAX_FIELD_CHARS} characters and not be blank"
                ));
            }
        }
        if self.email.as_ref().is_some_and(|e| !e.contains('@')) {
            return Err("email must contain '@'".into());
        }
        Ok(())
    }

    /// Writes the given fields into `contact`, leaving the others alone.
    pub fn apply(self, contact: &mut Contact) {
        if let Some(address) = self.address {
            contact.address = address;
        }
        if let Some(phone) = self.phone {
            contact.phone = phone;
        }
        if let Some(email) = self.email {
            contact.email = email;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ids_are_stable_and_unique() {
        let contacts = seed();
        assert_eq!(contacts[0].id, "c_1001");
        assert_eq!(contacts[11].id, "c_1012");
        let mut ids: Vec<_> = contacts.iter().map(|c| &c.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 12);
    }

    #[test]
    fn patch_rules() {
        let patch = |json: &str| serde_json::from_str::<ContactPatch>(json);
        assert!(patch(r#"{"phone":"1"}"#).unwrap().check().is_ok());
        assert!(patch(r#"{}"#).unwrap().check().is_err());
        assert!(patch(r#"{"email":"nobody"}"#).unwrap().check().is_err());
        assert!(patch(r#"{"address":" "}"#).unwrap().check().is_err());
        let long = format!(r#"{{"address":"{}"}}"#, "x".repeat(201));
        assert!(patch(&long).unwrap().check().is_err());
        assert!(patch(r#"{"name":"X"}"#).is_err());
        assert!(patch(r#"{"phone":5}"#).is_err());
    }
}
