#![doc = include_str!("upgrade.md")]

pub mod upgrade_06_07 {
    //! See: [Guide for upgrading v0.6 to v0.7](https://docs.rs/openraft/0.8.9/openraft/docs/upgrade_guide/upgrade_06_07)
}
pub mod upgrade_07_08 {
    //! See: [Guide for upgrading v0.7 to v0.8](https://docs.rs/openraft/0.8.9/openraft/docs/upgrade_guide/upgrade_07_08)
}
pub mod upgrade_083_084 {
    //! See: [Guide for upgrading v0.8.3 to v0.8.4](https://docs.rs/openraft/0.8.9/openraft/docs/upgrade_guide/upgrade_083_084)
}
pub mod upgrade_08_09 {
    #![doc = include_str!("upgrade-v08-v09.md")]
}
pub mod upgrade_09_10 {
    #![doc = include_str!("upgrade-v09-v10.md")]
}
