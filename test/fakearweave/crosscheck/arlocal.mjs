// Runs arlocal (a local Arweave node, npm) on the port given, until stdin closes.
import pkg from "arlocal";

const ArLocal = pkg.default ?? pkg;

const port = Number(process.argv[2]);
const node = new ArLocal(port, false);
await node.start();
console.log("ready");
process.stdin.resume();
process.stdin.on("end", async () => {
  await node.stop();
  process.exit(0);
});
