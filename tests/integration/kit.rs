//! The test kit holds every test to what it says: a [`Redlock`] that says nothing of its status,
//! stdout or stderr expects exit 0 and silence, and each setter replaces only the default of what
//! it speaks of.

use crate::common::*;

#[test]
#[should_panic(expected = "expected exit 0")]
fn an_unsaid_status_is_0() {
    let redis = RedisServer::start();
    Redlock::run(&redis).key("k").sh("exit 3").output();
}

#[test]
#[should_panic(expected = "stdout not empty")]
fn an_unsaid_stdout_is_empty() {
    let redis = RedisServer::start();
    Redlock::run(&redis).key("k").sh("echo out").output();
}

#[test]
#[should_panic(expected = "stderr not empty")]
fn an_unsaid_stderr_is_empty() {
    let redis = RedisServer::start();
    Redlock::run(&redis).key("k").sh("echo err >&2").output();
}

#[test]
#[should_panic(expected = "expected exit 0")]
fn saying_what_the_streams_hold_leaves_the_status_expected_0() {
    let redis = RedisServer::start();
    Redlock::run(&redis)
        .key("k")
        .sh("echo out; echo err >&2; exit 4")
        .any_stdout()
        .any_stderr()
        .output();
}

#[test]
fn each_setter_replaces_the_default_of_what_it_speaks_of() {
    let redis = RedisServer::start();
    let noisy = || {
        Redlock::run(&redis)
            .key("k")
            .sh("echo out; echo err >&2; exit 4")
    };
    noisy()
        .status(4)
        .stdout_contains("out")
        .stderr_contains("err")
        .output();
    noisy().status(4).stdout("out\n").stderr_lines(1).output();
    noisy().any_status().any_stdout().any_stderr().output();
    Redlock::run(&redis)
        .key("k")
        .sh("kill -s TERM $$")
        .signal(15)
        .output();
}
