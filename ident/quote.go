package ident

import "strconv"

// maxEcho is the most bytes of client input an error message repeats: enough to recognise a
// value, never a 64 KiB body written back.
const maxEcho = 64

// Quote is s in Go quotes, as an error message shows client input: cut to its first 64
// bytes, with "…" and the full length when it was longer.
func Quote(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxEcho]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// Clip is a message (a decoder's error, say) cut to its first 256 bytes, as an error message
// repeats it.
func Clip(msg string) string {
	const max = 4 * maxEcho
	if len(msg) <= max {
		return msg
	}
	return msg[:max] + "…"
}
