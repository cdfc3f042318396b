// Checks with arbundles data items and a bundle made by the Go package: node verify.mjs DIR,
// where DIR holds manifest.json (written by TestCrossCheckArbundlesVerifiesOurs) and the files
// it names. Each item must be valid for arbundles (or, when the manifest says so, invalid), and
// arbundles must read the same id, signature data, owner, target, anchor, tags and data as Go
// wrote; the bundle must unbundle to the same ids and verify. Exits 1 on any difference.
// (arweave-js warns "Transaction Verification Failed!" for the item meant to be invalid.)
import { DataItem, unbundleData } from "@dha-team/arbundles";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node verify.mjs DIR");
  process.exit(2);
}
const manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json")));
const hex = (u8) => Buffer.from(u8).toString("hex");
const sha256 = (u8) => crypto.createHash("sha256").update(u8).digest("hex");
let failures = 0;

for (const want of manifest.items) {
  const item = new DataItem(fs.readFileSync(path.join(dir, want.file)));
  const problems = [];
  const valid = await item.isValid();
  if (valid !== want.valid) problems.push(`isValid() is ${valid}, want ${want.valid}`);
  if (want.valid) {
    const got = {
      id: item.id,
      signature_type: item.signatureType,
      signature_data: hex(await item.getSignatureData()),
      owner: item.owner,
      target: item.target,
      anchor: item.anchor,
      tags: JSON.stringify(item.tags.map((t) => [t.name, t.value])),
      data_sha256: sha256(item.rawData),
    };
    for (const [k, v] of Object.entries(got)) {
      const w = k === "tags" ? JSON.stringify(want.tags) : want[k];
      if (v !== w) problems.push(`${k} ${String(v).slice(0, 80)}, Go ${String(w).slice(0, 80)}`);
    }
  }
  if (problems.length) failures++;
  console.log(`${problems.length ? "FAIL" : "ok  "} ${want.name} ${item.id}${problems.map((p) => "\n     " + p).join("")}`);
}

const bundle = unbundleData(fs.readFileSync(path.join(dir, manifest.bundle.file)));
const bundleProblems = [];
if (JSON.stringify(bundle.getIds()) !== JSON.stringify(manifest.bundle.ids)) bundleProblems.push("header ids differ from Go's");
if (JSON.stringify(bundle.items.map((i) => i.id)) !== JSON.stringify(manifest.bundle.ids)) bundleProblems.push("item ids differ from Go's");
for (const [i, item] of bundle.items.entries()) {
  if (!(await item.isValid())) bundleProblems.push(`item ${i} is not valid`);
}
if (!(await bundle.verify())) bundleProblems.push("bundle.verify() is false");
if (bundleProblems.length) failures++;
console.log(
  `${bundleProblems.length ? "FAIL" : "ok  "} bundle of ${bundle.length} items${bundleProblems.map((p) => "\n     " + p).join("")}`,
);

console.log(`${manifest.items.length} items and a bundle checked by arbundles: ${failures ? `${failures} failed` : "all as Go made them"}`);
process.exit(failures ? 1 : 0);
