// @waku/sds 0.0.8 side of bench/engine_throughput.py (run that, not this).
//
// Workload (same as the Python side): two participants alternate sending N
// messages; message i is sent by participant i % 2 and received by the other.
// Causal history 2, default bloom filter (10,000 / 0.001), SDS-R enabled
// with its defaults. Per message: pushOutgoingMessage + processTasks (the
// send callback encodes the frame, as a real app must to broadcast it), then
// Message.decode + pushIncomingMessage + processTasks on the receiver. No
// sweeps during the loop (the Python side does not tick either).
//
// Which @waku/sds: the copy installed for the interop tests by
// `npm ci --prefix tests/interop` (pinned to 0.0.8 there). The package is
// ESM-only with an "import"-only exports map, so createRequire cannot load
// it; it is imported by file path, resolved relative to this script:
//   ../tests/interop/node_modules/@waku/sds/dist/index.js
// Its own dependencies (@waku/proto, ...) then resolve from
// tests/interop/node_modules as usual. Set WAKU_SDS_DIR to the directory of
// another @waku/sds install (the one holding package.json) to override.
//
// Usage: node bench/waku_alternate.mjs [--messages N] [--repeat R]
// Prints one JSON object on stdout.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const pkgDir = process.env.WAKU_SDS_DIR
  ? process.env.WAKU_SDS_DIR
  : fileURLToPath(new URL("../tests/interop/node_modules/@waku/sds/", import.meta.url));

let sds;
let version;
try {
  version = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")).version;
  sds = await import(pathToFileURL(join(pkgDir, "dist", "index.js")).href);
} catch (err) {
  console.error(`cannot load @waku/sds from ${pkgDir}: ${err.message}\nrun: npm ci --prefix tests/interop`);
  process.exit(2);
}
const { MessageChannel, Message } = sds;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? Number(process.argv[i + 1]) : fallback;
}

const N = arg("--messages", 2000);
const REPEAT = arg("--repeat", 1);
const enc = new TextEncoder();

async function run(n) {
  const options = { causalHistorySize: 2 }; // bloom, possibleAcksThreshold, repair: defaults
  const chans = [
    new MessageChannel("bench", "participant-0", options),
    new MessageChannel("bench", "participant-1", options)
  ];
  const payloads = Array.from({ length: n }, (_, i) => enc.encode(`benchmark message ${i}`));
  let frame = null;
  const broadcast = async (message) => {
    frame = message.encode();
    return { success: true };
  };
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const sender = chans[i % 2];
    const receiver = chans[1 - (i % 2)];
    frame = null;
    sender.pushOutgoingMessage(payloads[i], broadcast);
    await sender.processTasks();
    const message = Message.decode(frame);
    receiver.pushIncomingMessage(message, undefined);
    await receiver.processTasks();
  }
  const seconds = (performance.now() - t0) / 1000;
  const logs = chans.map((c) => c.localHistory.length);
  const incoming = chans.map((c) => c.incomingBuffer.length);
  if (logs[0] !== n || logs[1] !== n || incoming[0] !== 0 || incoming[1] !== 0) {
    throw new Error(`workload went wrong: log lengths ${logs}, incoming buffers ${incoming}`);
  }
  return seconds;
}

const runs = [];
for (let r = 0; r < REPEAT; r++) runs.push(await run(N));
const best = Math.min(...runs);
process.stdout.write(JSON.stringify({
  implementation: "@waku/sds",
  version,
  node: process.version,
  messages: N,
  seconds: best,
  runs,
  rate: N / best
}) + "\n");
