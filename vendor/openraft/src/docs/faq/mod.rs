//!  # FAQ
#![doc = include_str!("faq-toc.md")]
#![doc = include_str!("faq.md")]
