// Reads transaction ID from the node at URL with arweave-js and prints what it found:
// {verified, data_sha256, data_size, tags: [[name, value]…]}.
import Arweave from "arweave";
import crypto from "node:crypto";

const [url, id] = process.argv.slice(2);
const u = new URL(url);
const arweave = Arweave.init({ host: u.hostname, port: Number(u.port), protocol: u.protocol.replace(":", "") });
const tx = await arweave.transactions.get(id);
const verified = await arweave.transactions.verify(tx);
const data = await arweave.transactions.getData(id, { decode: true });
console.log(JSON.stringify({
  verified,
  data_size: data.byteLength,
  data_sha256: crypto.createHash("sha256").update(data).digest("hex"),
  tags: tx.tags.map((t) => [t.get("name", { decode: true, string: true }), t.get("value", { decode: true, string: true })]),
}));
