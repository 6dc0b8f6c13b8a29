//! The SHA1 of every script's text (see `scripts`), by its definition's name: what EVALSHA
//! sends. Written by the test `stored_hashes_are_the_texts_hashes` (run it with
//! `SNAPSHOTS=overwrite` after changing a script); do not edit by hand.

/// The stored SHA1 of the script called `name` ("" for a name with none: EVALSHA is
/// then answered NOSCRIPT, and the text goes by EVAL).
pub(super) fn of(name: &str) -> &'static str {
    match name {
        "Take" => "a537bb99915f2acd11fa2e52665c80c02528893b",
        "Acquire" => "51d108c96b6d652770e738ca97c3960e2f02b712",
        "AcquireMany" => "9626cf0d49a44f75b40e39d6ac1822520aa9117f",
        "Extend" => "ed7e1b699c648a85372bec987ca3020e08347348",
        "ExtendMany" => "60a15d4fa6055f0fb551a2f8deab4eb74cff35a3",
        "GiveBack" => "2618f622549fa286f2ad06b5162ffa0311f46506",
        "ReleaseMany" => "19491c3ad943e2e47b83cb2be5a612436f4497a2",
        "Leave" => "8ba5a21bfc5f66365505081ccc0d63bd8b71dd66",
        "Interrupt" => "d6c347c4c2821700eadb0f3e9920b8d06b755fe6",
        "Undo" => "a832cc0d9f819f5c9621e7b575426d22b9c137bd",
        "FenceRead" => "0562638549433ea8eedbc9bfbdc5c5276439ec6a",
        "FenceRaise" => "e1246bdfae50b50ff90800f6dd93ab2059308318",
        "Inspect" => "a57f681c7e3706b34c76429ce4ae8521fc0e0f89",
        "ReadRuns" => "2599f3818611de1f35c1bd44d2d474cf95cf9d1b",
        "ForceRelease" => "29493bd74e89beba90901bdda93ad5d9907e8705",
        _ => "",
    }
}
