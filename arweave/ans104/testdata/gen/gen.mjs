// Writes ../vectors.json: ANS-104 data items and a bundle built and signed by arbundles, for the
// Go package to check its Avro tags, deep hash, binary layout, ids and signature verification
// against. Type 1 items are signed with the Arweave test wallet (arweave/testdata/wallet.json,
// it holds nothing); type 2 items with an Ed25519 key from a fixed seed.
// Run: cd arweave/ans104/testdata/gen && npm ci && node gen.mjs
import { ArweaveSigner, Curve25519, bundleAndSignData, createData } from "@dha-team/arbundles";
import crypto from "node:crypto";
import fs from "node:fs";

const b64url = (u8) => Buffer.from(u8).toString("base64url");
const hex = (u8) => Buffer.from(u8).toString("hex");

const wallet = JSON.parse(fs.readFileSync(new URL("../../../testdata/wallet.json", import.meta.url)));
const arweaveSigner = new ArweaveSigner(wallet);

// The Ed25519 seed: (i*7+3) mod 256, so that the Go test makes the same key.
const seed = Uint8Array.from({ length: 32 }, (_, i) => (i * 7 + 3) % 256);
const pkcs8 = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
const publicKey = Buffer.from(
  crypto.createPublicKey(crypto.createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" })).export({ format: "jwk" }).x,
  "base64url",
);

// arbundles' own Ed25519 key type (signature type 2), given a raw seed rather than a chain's
// key format.
class Ed25519Signer extends Curve25519 {
  constructor() {
    super("", "");
  }
  get key() {
    return seed;
  }
  get publicKey() {
    return publicKey;
  }
}
const ed25519Signer = new Ed25519Signer();

// data(size): the bytes every case uses, (i*31+7) mod 256, so that the Go test makes them too.
const data = (size) => Uint8Array.from({ length: size }, (_, i) => (i * 31 + 7) % 256);
const target = b64url(Uint8Array.from({ length: 32 }, (_, i) => 255 - i));
const anchor = "shardkeeper-anchor-0123456789abc"; // arbundles takes the anchor as a 32-byte string

const cases = [
  { name: "no tags, target or anchor", size: 11, tags: [] },
  {
    name: "several tags",
    size: 1000,
    tags: [
      ["App-Name", "shardkeeper"],
      ["Content-Type", "application/json"],
      ["Seq", "42"],
      ["Prev-Id", "x".repeat(43)],
    ],
  },
  { name: "target only", size: 32, tags: [["Seq", "1"]], target },
  { name: "anchor only", size: 32, tags: [["Seq", "2"]], anchor },
  { name: "target and anchor", size: 32, tags: [["Seq", "3"]], target, anchor },
  { name: "empty data", size: 0, tags: [] },
  { name: "empty data with tags", size: 0, tags: [["Type", "heartbeat"]], anchor },
  { name: "larger data", size: 50000, tags: [["Content-Type", "application/octet-stream"]] },
  {
    name: "unicode tags",
    size: 7,
    tags: [
      ["Unicode", "é→✓"],
      ["Emoji", "🔐 shard 🗝"],
      ["Ключ", "значение"],
      ["Long-Unicode", "ключ→✓🗝".repeat(10)],
    ],
  },
  { name: "long tag", size: 5, tags: [["N".repeat(100), "v".repeat(3000)]] },
  { name: "128 tags", size: 5, tags: Array.from({ length: 128 }, (_, i) => [`T${i}`, `${i * i}`]) },
];

const out = {
  generator: "@dha-team/arbundles 1.0.4",
  ed25519_seed: hex(seed),
  ed25519_public_key: hex(publicKey),
  type1_owner: wallet.n,
  items: [],
};
const signed = {};
for (const [type, signer] of [
  [1, arweaveSigner],
  [2, ed25519Signer],
]) {
  for (const c of cases) {
    const opts = { tags: c.tags.map(([name, value]) => ({ name, value })) };
    if (c.target) opts.target = c.target;
    if (c.anchor) opts.anchor = c.anchor;
    const item = createData(data(c.size), signer, opts);
    await item.sign(signer);
    if (!(await item.isValid())) throw new Error(`arbundles does not verify its own ${c.name} (type ${type})`);
    const name = `type ${type}: ${c.name}`;
    signed[name] = item;
    out.items.push({
      name,
      signature_type: type,
      data_size: c.size,
      tags: c.tags,
      target: c.target ?? "",
      anchor: c.anchor ? b64url(Buffer.from(c.anchor)) : "",
      tags_avro: hex(item.rawTags),
      deep_hash: hex(await item.getSignatureData()),
      signature: item.signature,
      id: item.id,
      binary: item.getRaw().toString("base64"),
    });
  }
}

// A bundle of items of both types, in this order.
const bundleItems = ["type 2: several tags", "type 1: target and anchor", "type 2: empty data", "type 1: unicode tags", "type 2: 128 tags"];
const bundle = await bundleAndSignData(
  bundleItems.map((n) => signed[n]),
  ed25519Signer,
);
if (!(await bundle.verify())) throw new Error("arbundles does not verify its own bundle");
out.bundle = { items: bundleItems, ids: bundle.getIds(), binary: bundle.getRaw().toString("base64") };

fs.writeFileSync(new URL("../vectors.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.items.length} data items and a bundle of ${bundleItems.length}`);
