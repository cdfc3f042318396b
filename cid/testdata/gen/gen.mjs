// Writes ../vectors.json: JSON documents, their RFC 8785 canonical form (canonicalize, by the
// RFC's author) and the CIDv1 (raw codec, sha2-256, base32) of that form (multiformats).
import canonicalize from "canonicalize";
import { CID } from "multiformats/cid";
import { sha256 } from "multiformats/hashes/sha2";
import fs from "node:fs";

const docs = [
  `{}`,
  `[]`,
  `{"b":2,"a":1}`,
  `{"manifest":{"name":"device","version":3,"tags":["x","y"],"nested":{"z":null,"a":true}}}`,
  `[1, 1.0, 0.1, 1e21, 1e20, 1e-7, 1e-6, 123456789012345680000, 5e-324, 1.7976931348623157e308, -0, -1.5e-10, 333333333.3333333, 0.000001234]`,
  `{"\\u20ac":"euro","\\ud83d\\ude00":"emoji","\\ufb33":"hebrew","a":"ascii","\\u0080":"c1"}`,
  `{"esc":"quote\\" backslash\\\\ slash/ tab\\t nl\\n cr\\r bs\\b ff\\f ctrl\\u0001\\u001f del\\u007f"}`,
  `{"unicode":"h\\u00e9llo \\u2713 \\ud83d\\ude00"}`,
  `{"big":9007199254740993, "neg":-42, "frac":2.5e-3}`,
  `{"literal":"é→✓","arr":[{"b":1,"a":[true,false,null]}]}`,
];

const cases = [];
for (const doc of docs) {
  const canonical = canonicalize(JSON.parse(doc));
  const bytes = new TextEncoder().encode(canonical);
  const cid = CID.createV1(0x55, await sha256.digest(bytes)).toString();
  cases.push({ input: doc, canonical, cid });
}
fs.writeFileSync(new URL("../vectors.json", import.meta.url), JSON.stringify({ cases }, null, 1) + "\n");
console.log(`wrote ${cases.length} cases`);
