// Writes ../vectors.json: format-2 transactions built and signed by arweave-js, for the Go
// package to check its deep hash, data root, chunk proofs and signature verification against.
// The wallet is a test wallet (../wallet.json), made on first run; it holds nothing.
import Arweave from "arweave";
import { generateTransactionChunks } from "arweave/node/lib/merkle.js";
import fs from "node:fs";

const arweave = Arweave.init({ host: "127.0.0.1", port: 1984, protocol: "http" });
const b64url = (u8) => Arweave.utils.bufferTob64Url(u8);
const hex = (u8) => Buffer.from(u8).toString("hex");

const walletPath = new URL("../wallet.json", import.meta.url);
let wallet;
if (fs.existsSync(walletPath)) {
  wallet = JSON.parse(fs.readFileSync(walletPath));
} else {
  wallet = await arweave.wallets.generate();
  fs.writeFileSync(walletPath, JSON.stringify(wallet, null, 2) + "\n");
}

// data(size): the bytes every case uses, (i*31+7) mod 256, so that the Go test makes them too.
const data = (size) => Uint8Array.from({ length: size }, (_, i) => (i * 31 + 7) % 256);
const anchor = b64url(Uint8Array.from({ length: 48 }, (_, i) => i));

const cases = [
  { name: "empty data", size: 0, tags: [] },
  { name: "one byte", size: 1, tags: [["Content-Type", "application/json"]] },
  { name: "attestation-sized", size: 1000, tags: [["App-Name", "shardkeeper"], ["Seq", "42"], ["Prev-Tx", "x".repeat(43)]] },
  { name: "one full chunk", size: 256 * 1024, tags: [] },
  { name: "a byte past a chunk (rebalanced)", size: 256 * 1024 + 1, tags: [] },
  { name: "three chunks", size: 600 * 1024, tags: [["Unicode", "é→✓"]] },
  { name: "five chunks, odd layer", size: 1024 * 1024 + 100, tags: [] },
  { name: "transfer", size: 10, tags: [], target: b64url(Uint8Array.from({ length: 32 }, (_, i) => 255 - i)), quantity: "1000000" },
];

const out = { wallet_address: await arweave.wallets.jwkToAddress(wallet), cases: [] };
for (const c of cases) {
  const attrs = { data: data(c.size), last_tx: anchor, reward: "123456789" };
  if (c.target) Object.assign(attrs, { target: c.target, quantity: c.quantity });
  const tx = await arweave.createTransaction(attrs, wallet);
  for (const [k, v] of c.tags) tx.addTag(k, v);
  await arweave.transactions.sign(tx, wallet);
  if (!(await arweave.transactions.verify(tx))) throw new Error(`arweave-js does not verify ${c.name}`);
  const json = tx.toJSON();
  delete json.data; // the Go test makes the data again from its size
  const proofs = c.size > 0 ? (await generateTransactionChunks(data(c.size))).proofs : [];
  out.cases.push({
    name: c.name,
    data_size: c.size,
    tx: json,
    signature_data: hex(await tx.getSignatureData()),
    proofs: proofs.map((p) => ({ offset: p.offset, data_path: b64url(p.proof) })),
  });
}
fs.writeFileSync(new URL("../vectors.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.cases.length} cases`);
