// Package testenv owns what the tests need from the machine and from the
// environment: the typed requirements of integration tests (root, Debian's
// ZooKeeper, a JDK, Kazoo, Chromium, a standalone server...) with one rule for a
// missing one (skip, or fail when ZLC_REQUIRE_INTEGRATION is set), and the one table
// of every ZLC_* environment variable the project reads, tests and product alike,
// from which the README's table is written (TestREADMEListsEveryVariable).
package testenv
