package ans104

import "errors"

// The kinds of failure, for errors.Is; the errors themselves say which field and where.
var (
	// ErrMalformed: the bytes are not a data item or a bundle (a length past the end, an
	// unknown signature type, a presence byte other than 0 or 1, a bundle header whose id is
	// not its item's, ...), or the fields given to build one do not fit the format.
	ErrMalformed = errors.New("malformed")
	// ErrTagLimits: tags outside the limits of ANS-104 (count, empty or long names and
	// values) or more Avro bytes than arbundles reads.
	ErrTagLimits = errors.New("tags outside the ANS-104 limits")
	// ErrSignature: the signature does not verify against the owner, or the id is not the
	// hash of the signature.
	ErrSignature = errors.New("invalid signature")
)
