use std::time::{SystemTime, UNIX_EPOCH};

/// UTC date and time from Unix seconds (Howard Hinnant's civil_from_days).
fn civil(seconds: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rest / 3600, rest / 60 % 60, rest % 60)
}

fn now() -> (i64, u32) {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (since.as_secs() as i64, since.subsec_nanos())
}

/// `2026-11-30T02:08:50Z`.
pub fn rfc3339_now() -> String {
    let (y, mo, d, h, mi, s) = civil(now().0);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// A run id that sorts by time and says what ran: `20261130-020850-demo-3f2a`.
pub fn new_run_id(suite: &str) -> String {
    let (seconds, nanos) = now();
    let (y, mo, d, h, mi, s) = civil(seconds);
    let tag = (nanos ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}-{suite}-{tag:04x}")
}

#[cfg(test)]
mod tests {
    use super::civil;

    #[test]
    fn converts_known_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil(1_795_918_130), (2026, 11, 29, 2, 8, 50));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0, 0));
    }
}
