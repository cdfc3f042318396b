// Package ans104 holds ANS-104 ("Bundled Data v2.0 - Binary Serialization", arweave-standards
// ans/ANS-104.md): data items, each signed by its own key and identified by the hash of its
// signature, and bundles that carry many of them in the data of one Arweave transaction tagged
// Bundle-Format: binary and Bundle-Version: 2.0.0. It reads and writes what arbundles, the
// library bundlers and gateways run, does: the Go tests check it against arbundles' own output
// (testdata/vectors.json, made by testdata/gen/gen.mjs) and arbundles checks items and bundles
// made here (testdata/gen/verify.mjs, run by TestCrossCheckArbundlesVerifiesOurs).
//
// Two signature types are supported: 1, Arweave (RSA-PSS over SHA-256 with a 4096-bit key whose
// public exponent is 65537; the owner is the 512-byte modulus), and 2, Ed25519 (the owner is the
// 32-byte public key).
//
// # Layout of a data item
//
//	signature type   u16 little-endian
//	signature        512 bytes (type 1) or 64 (type 2)
//	owner            512 bytes (type 1) or 32 (type 2)
//	target           presence byte 0 or 1, then 32 bytes when 1
//	anchor           presence byte 0 or 1, then 32 bytes when 1
//	number of tags   u64 little-endian
//	tag bytes        u64 little-endian
//	tags             an Avro array of {name: bytes, value: bytes}
//	data             the rest
//
// # Invariants
//
//   - Every *DataItem is well formed: it was either parsed by Parse (or ParseBundle) or
//     assembled here and then put through the same parser, so what is built and what is read
//     obey the same rules.
//   - A data item keeps its bytes. Its tags are kept as the Avro bytes it was signed with, so an
//     item whose tags another writer encoded differently (several blocks, negative counts) still
//     verifies and serializes back to the same bytes. The accessors return views of those bytes:
//     they must not be changed.
//   - The signed message is the deep hash (package arweave's DeepHash, SHA-384) of
//     ["dataitem", "1", signature type in decimal, owner, target, anchor, Avro tag bytes, data],
//     with an absent target or anchor as empty. This is what arbundles signs and verifies; the
//     prose of ANS-104 shows a list of tag pairs and no signature type, which no deployed
//     implementation uses.
//   - The id is SHA-256 of the signature. It is not among an item's bytes; a bundle's header
//     repeats it, and ParseBundle refuses a header whose id is not its item's.
//   - Tags obey the limits of ANS-104 §2.1 on building and on parsing: at most 128 tags, names
//     of 1 to 1024 bytes, values of 1 to 3072 bytes; and, as arbundles refuses larger ones, at
//     most 4096 bytes of Avro. The number of tags in the header equals the number in the array.
//     (arbundles itself checks only the last two: items with empty names or values, or long
//     ones, that it accepts are refused here.)
//   - Presence bytes other than 0 and 1, lengths past the end, and bytes after the tag array
//     are refused with an error that names the field; parsing never panics (FuzzParseDataItem).
//   - Type 1 signatures made here use a 32-byte salt, as arweave-js makes them in browsers;
//     arbundles on Node uses the longest salt the key allows (478 bytes). Verification accepts
//     any salt length, as arbundles and Arweave nodes do.
package ans104
