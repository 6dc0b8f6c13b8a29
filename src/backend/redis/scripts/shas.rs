//! The SHA1 of every script's text (see `scripts`), by its definition's name: what EVALSHA
//! sends. Written by the test `stored_hashes_are_the_texts_hashes` (run it with
//! `SNAPSHOTS=overwrite` after changing a script); do not edit by hand.

/// The stored SHA1 of the script called `name` ("" for a name with none: EVALSHA is
/// then answered NOSCRIPT, and the text goes by EVAL).
pub(super) fn of(name: &str) -> &'static str {
    match name {
        "Take" => "1d84f5d3caf7b975ec42462397607110005915e5",
        "Acquire" => "23a2ffd24e16bd96fc26f6af2c217d4577f78951",
        "AcquireMany" => "5fb4266fb74b70a6a8436681925b51411cc02f7a",
        "Extend" => "83cd829a6cb53a238011719f6e901425fb25e84d",
        "ExtendMany" => "515fa2466a6e2686634759f64ed6171d9e1076d1",
        "GiveBack" => "77b33d1bf23c4b8671727fa4e66f5f14bc8b696a",
        "ReleaseMany" => "6d002fcbb13e10a110f964f53225075e8c13e584",
        "Leave" => "f44e6dfb92b19918c95b04b72f657f7eab72a36b",
        "Interrupt" => "d6c347c4c2821700eadb0f3e9920b8d06b755fe6",
        "Undo" => "3d3d4846c039233f0b14719f51c3afe6c54585ac",
        "FenceRead" => "0562638549433ea8eedbc9bfbdc5c5276439ec6a",
        "FenceRaise" => "e1246bdfae50b50ff90800f6dd93ab2059308318",
        "Inspect" => "c253c534966506003989544e3a5cf310a215570b",
        "ReadRuns" => "9aab1826d91f1cbac73db06b39405ee80ceae24d",
        "ForceRelease" => "29493bd74e89beba90901bdda93ad5d9907e8705",
        _ => "",
    }
}
