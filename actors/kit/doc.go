// Package kit holds the building blocks that domain actor kinds share, so that each is written
// once: a time-ordered index kept in an actor's storage (TimeIndex), a count kept in one key
// (Counter), the cached arming of a garbage-collection alarm (GCAlarm), dispatch of messages by
// method to typed handlers (Dispatch), and quoting of client input in error messages (Quote).
//
// Everything here reads and writes through *actors.Context, so it inherits the runtime's
// guarantees (one message at a time, writes committed with the message), and knows nothing of
// HTTP. The key layouts are part of the stored data: they must never change.
package kit
