package conformance

// The tests run the kinds of lock service zlockcheck ships with.
import _ "github.com/zlockcheck/zlockcheck/lockservice/builtin"
