//! Timestamps as RFC 3339 UTC text.
//!
//! Notes are stamped in UTC at whole seconds, always in the one shape
//! `YYYY-MM-DDTHH:MM:SSZ`, so that comparing the text compares the time: list
//! and search sort on the stored strings without parsing them back.

use std::time::{SystemTime, UNIX_EPOCH};

const SECS_PER_DAY: u64 = 86_400;
/// Any 400 consecutive Gregorian years hold 97 leap years, whatever year
/// they start in.
const DAYS_PER_400_YEARS: u64 = 146_097;

/// Seconds since the Unix epoch, from the WASI wall clock. A clock set before
/// 1970 is a host fault; it reads as 0 so that saving still works.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(secs: u64) -> String {
    let (year, month, day) = civil_from_days(secs / SECS_PER_DAY);
    let in_day = secs % SECS_PER_DAY;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60
    )
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

/// Year, month (1-12) and day (1-31) of the `days`-th day after 1970-01-01.
///
/// Counting years and months off one by one is plainer than a closed
/// formula; skipping whole 400-year cycles first bounds the loop at 400
/// steps for any input.
fn civil_from_days(days: u64) -> (u64, u32, u32) {
    let mut year = 1970 + days / DAYS_PER_400_YEARS * 400;
    let mut days = days % DAYS_PER_400_YEARS;
    loop {
        let len = if is_leap(year) { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let february = if is_leap(year) { 29 } else { 28 };
    let lengths = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 1;
    for len in lengths {
        if days < len {
            break;
        }
        days -= len;
        month += 1;
    }
    // `days` is now below the month's length, at most 30.
    (year, month, days as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn leap_days_and_year_ends() {
        // Expected values computed with `date -u -d @<secs>`.
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_709_164_799), "2024-02-28T23:59:59Z");
        assert_eq!(rfc3339(1_709_164_800), "2024-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_767_225_600), "2026-01-01T00:00:00Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
        assert_eq!(rfc3339(253_402_300_799), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn century_rules() {
        // 1900 and 2100 are not leap years; 2000 is.
        assert!(!is_leap(1900));
        assert!(!is_leap(2100));
        assert!(is_leap(2000));
        assert!(is_leap(2024));
        // 2100-03-01 follows 2100-02-28 directly.
        assert_eq!(rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(rfc3339(4_107_542_400), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn every_day_follows_the_previous_one() {
        let mut prev = civil_from_days(0);
        for d in 1..(DAYS_PER_400_YEARS * 2) {
            let next = civil_from_days(d);
            let (y, m, day) = prev;
            let month_len = match m {
                2 if is_leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let expected = if day < month_len {
                (y, m, day + 1)
            } else if m < 12 {
                (y, m + 1, 1)
            } else {
                (y + 1, 1, 1)
            };
            assert_eq!(next, expected, "day {d}");
            prev = next;
        }
    }

    #[test]
    fn text_order_is_time_order() {
        let a = rfc3339(1_709_164_799);
        let b = rfc3339(1_709_164_800);
        let c = rfc3339(4_102_444_799);
        assert!(a < b && b < c);
    }
}
