//! Timestamps, one format everywhere (audit records, journal entries): RFC 3339, UTC,
//! milliseconds. A leaf: it imports nothing of ferret's.

/// Now, as `2026-11-22T06:10:29.123Z`.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
