//! The [`DateTime`] of SQLite's date.c: a Julian day number in
//! milliseconds and/or calendar fields, and the conversions between them.

/// The Julian day in milliseconds of 1970-01-01 00:00:00.
pub(super) const UNIX_EPOCH_JD_MS: i64 = 210_866_760_000_000;

/// The largest valid Julian day in milliseconds: 9999-12-31 23:59:59.999.
const MAX_JD_MS: i64 = 464_269_060_799_999;

/// Milliseconds in a day.
pub(super) const DAY_MS: i64 = 86_400_000;

/// A date and time being computed, field for field SQLite's `DateTime`:
/// which of the Julian day and the calendar fields are valid, and the
/// flags the modifiers set.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DateTime {
    /// The Julian day number times 86 400 000.
    pub(super) jd: i64,
    /// Year.
    pub(super) year: i32,
    /// Month, 1 to 12.
    pub(super) month: i32,
    /// Day of the month.
    pub(super) day: i32,
    /// Hour.
    pub(super) hour: i32,
    /// Minute.
    pub(super) minute: i32,
    /// Time zone offset in minutes.
    pub(super) tz: i32,
    /// Seconds, with the fraction; or the raw number when `raw_s`.
    pub(super) second: f64,
    /// `jd` is valid.
    pub(super) valid_jd: bool,
    /// `year`, `month`, `day` are valid.
    pub(super) valid_ymd: bool,
    /// `hour`, `minute`, `second` are valid.
    pub(super) valid_hms: bool,
    /// Days to subtract for the `floor` modifier (day-of-month overflow).
    pub(super) n_floor: i32,
    /// `second` holds the raw number the value was given as.
    pub(super) raw_s: bool,
    /// The value is out of range: the result is NULL.
    pub(super) is_error: bool,
    /// Show milliseconds (`subsec`).
    pub(super) use_subsec: bool,
    /// The time is known to be UTC.
    pub(super) is_utc: bool,
    /// The time is known to be local time.
    pub(super) is_local: bool,
}

/// A C cast of a double to a 64-bit integer on x86-64: truncation, and the
/// "integer indefinite" `i64::MIN` for NaN and values out of range.
pub(super) fn c_i64(x: f64) -> i64 {
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// A C cast of a double to a 32-bit integer on x86-64 (see [`c_i64`]).
pub(super) fn c_i32(x: f64) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    }
}

/// Whether a Julian day in milliseconds is within 0000-... to 9999-12-31.
pub(super) fn valid_julian_day(jd: i64) -> bool {
    (0..=MAX_JD_MS).contains(&jd)
}

/// Days in month `m` of year `y` (30 for a month out of 1 to 12, as C's
/// bit test gives).
pub(super) fn days_of_month(y: i32, m: i32) -> i32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        _ => 30,
    }
}

impl DateTime {
    /// Reset to the error state.
    pub(super) fn set_error(&mut self) {
        *self = DateTime {
            is_error: true,
            ..DateTime::default()
        };
    }

    /// Compute `jd` from the calendar fields (2000-01-01 when there is no
    /// date), applying and clearing the time zone offset (`computeJD`).
    pub(super) fn compute_jd(&mut self) {
        if self.valid_jd {
            return;
        }
        let (mut y, mut m, d);
        if self.valid_ymd {
            y = self.year;
            m = self.month;
            d = self.day;
        } else {
            y = 2000;
            m = 1;
            d = if self.valid_hms && self.hour == 24 {
                self.hour = 0;
                2
            } else {
                1
            };
        }
        if !(-4713..=9999).contains(&y) || self.raw_s {
            self.set_error();
            return;
        }
        if m <= 2 {
            y -= 1;
            m += 12;
        }
        // C's `int` arithmetic, in i64 so that no field can overflow it.
        let (y, m) = (i64::from(y), i64::from(m));
        let a = (y + 4800) / 100;
        let b = 38 - a + a / 4;
        let x1 = 36525 * (y + 4716) / 100;
        let x2 = 306_001 * (m + 1) / 10000;
        self.jd = c_i64(((x1 + x2 + i64::from(d) + b) as f64 - 1524.5) * 86_400_000.0);
        self.valid_jd = true;
        if self.valid_hms {
            let hm = i64::from(self.hour) * 3_600_000 + i64::from(self.minute) * 60_000;
            self.jd = self
                .jd
                .wrapping_add(hm)
                .wrapping_add(c_i64(self.second * 1000.0 + 0.5));
            if self.tz != 0 {
                self.jd = self.jd.wrapping_sub(i64::from(self.tz) * 60_000);
                self.valid_ymd = false;
                self.valid_hms = false;
                self.tz = 0;
                self.is_utc = true;
                self.is_local = false;
            }
        }
    }

    /// Set `n_floor` from the day-of-month overflow (`computeFloor`).
    pub(super) fn compute_floor(&mut self) {
        let max = days_of_month(self.year, self.month);
        self.n_floor = if self.day > max { self.day - max } else { 0 };
    }

    /// Compute the date from `jd` (`computeYMD`); an invalid `jd` is an error.
    pub(super) fn compute_ymd(&mut self) {
        if self.valid_ymd {
            return;
        }
        if !self.valid_jd {
            self.year = 2000;
            self.month = 1;
            self.day = 1;
        } else if !valid_julian_day(self.jd) {
            self.set_error();
            return;
        } else {
            // In range, so every intermediate fits an i32 as in C.
            let z = ((self.jd + 43_200_000) / DAY_MS) as i32;
            let alpha = c_i32((f64::from(z) + 32044.75) / 36524.25) - 52;
            let a = z + 1 + alpha - ((alpha + 100) / 4) + 25;
            let b = a + 1524;
            let c = c_i32((f64::from(b) - 122.1) / 365.25);
            let d = (36525 * (c & 32767)) / 100;
            let e = c_i32(f64::from(b - d) / 30.6001);
            let x1 = c_i32(30.6001 * f64::from(e));
            self.day = b - d - x1;
            self.month = if e < 14 { e - 1 } else { e - 13 };
            self.year = if self.month > 2 { c - 4716 } else { c - 4715 };
        }
        self.valid_ymd = true;
    }

    /// Compute the time of day from `jd` (`computeHMS`).
    pub(super) fn compute_hms(&mut self) {
        if self.valid_hms {
            return;
        }
        self.compute_jd();
        let day_ms = (self.jd.wrapping_add(43_200_000) % DAY_MS) as i32;
        self.second = f64::from(day_ms % 60_000) / 1000.0;
        let day_min = day_ms / 60_000;
        self.minute = day_min % 60;
        self.hour = day_min / 60;
        self.raw_s = false;
        self.valid_hms = true;
    }

    /// Both the date and the time of day.
    pub(super) fn compute_ymd_hms(&mut self) {
        self.compute_ymd();
        self.compute_hms();
    }

    /// Forget the calendar fields and the time zone (`jd` stays).
    pub(super) fn clear_ymd_hms_tz(&mut self) {
        self.valid_ymd = false;
        self.valid_hms = false;
        self.tz = 0;
    }

    /// Set to the current time, read from the system clock (`now`).
    /// Fails (true) if the clock is before 1970.
    pub(super) fn set_to_current(&mut self) -> bool {
        let Ok(since) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) else {
            return true;
        };
        let ms = i64::try_from(since.as_millis()).unwrap_or(i64::MAX);
        self.jd = ms.saturating_add(UNIX_EPOCH_JD_MS);
        self.valid_jd = true;
        self.is_utc = true;
        self.is_local = false;
        self.clear_ymd_hms_tz();
        false
    }

    /// Move from UTC to local time (`toLocaltime`), where local time is UTC:
    /// the calendar fields are recomputed as SQLite does through
    /// `localtime_r` in a UTC zone, including its mapping of years outside
    /// 1970 to 2037 onto an equivalent year.
    pub(super) fn shift_to_localtime(&mut self) {
        self.compute_jd();
        let (t_jd, year_diff) =
            if self.jd < 2_108_667_600 * 100_000 || self.jd > 2_130_141_456 * 100_000 {
                let mut x = *self;
                x.compute_ymd_hms();
                let diff = (2000 + x.year % 4) - x.year;
                x.year += diff;
                x.valid_jd = false;
                x.compute_jd();
                (x.jd, diff)
            } else {
                (self.jd, 0)
            };
        // `localtime_r` of whole seconds, in UTC.
        let mut utc = DateTime {
            jd: t_jd / 1000 * 1000,
            valid_jd: true,
            ..DateTime::default()
        };
        utc.compute_ymd_hms();
        self.year = utc.year - year_diff;
        self.month = utc.month;
        self.day = utc.day;
        self.hour = utc.hour;
        self.minute = utc.minute;
        self.second = utc.second.trunc() + (self.jd % 1000) as f64 * 0.001;
        self.valid_ymd = true;
        self.valid_hms = true;
        self.valid_jd = false;
        self.raw_s = false;
        self.tz = 0;
        self.is_error = false;
    }
}
