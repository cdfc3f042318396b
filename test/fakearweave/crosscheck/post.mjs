// Builds, signs and posts a transaction of SIZE bytes with arweave-js to the node at URL (the
// wallet is arweave/testdata/wallet.json), with the uploader (chunks past 256 KiB), and prints
// {id, status, data_sha256}.
import Arweave from "arweave";
import crypto from "node:crypto";
import fs from "node:fs";

const [url, size] = process.argv.slice(2);
const u = new URL(url);
const arweave = Arweave.init({ host: u.hostname, port: Number(u.port), protocol: u.protocol.replace(":", "") });
const wallet = JSON.parse(fs.readFileSync(new URL("../../../arweave/testdata/wallet.json", import.meta.url)));
const data = crypto.randomBytes(Number(size));
const tx = await arweave.createTransaction({ data }, wallet);
tx.addTag("App-Name", "crosscheck");
await arweave.transactions.sign(tx, wallet);
const uploader = await arweave.transactions.getUploader(tx);
let status = 200;
while (!uploader.isComplete) {
  await uploader.uploadChunk();
  if (uploader.lastResponseStatus >= 300) {
    status = uploader.lastResponseStatus;
    break;
  }
}
console.log(JSON.stringify({ id: tx.id, status, data_sha256: crypto.createHash("sha256").update(data).digest("hex") }));
