//! The lease thread against a fake clock and a fake lock: placeholder replaced below.
