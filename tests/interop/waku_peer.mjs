// A long-running @waku/sds 0.0.8 participant, driven over stdin/stdout.
//
// Protocol: one JSON object per line in, one JSON object per line out (one
// reply per command, in order). Every reply carries `cmd`, the `id` of the
// command if it had one, and `events`: every MessageChannel event emitted
// since the previous reply, as {type, detail} with JSON-safe details in
// @waku/sds's own camelCase shape (bigint -> decimal string, Uint8Array ->
// hex, Message -> its fields plus `kind`, Error -> {name, message}). Fields
// of command replies are snake_case. A failing command replies
// {"error": "..."} (plus cmd/id/events); the process never exits on a bad
// command. Errors raised outside any command (should not happen) come as
// {"id": null, "error": ...} lines: a driver should match replies by `id`.
//
// Commands (fields other than `cmd` are per command):
//   {"cmd":"init","channel":"c","participant":"p","options":{...}}
//       options are passed to `new MessageChannel(channel, participant, options)`
//       (causalHistorySize, possibleAcksThreshold, timeoutForLostMessagesMs,
//       enableRepair, repairConfig:{tMin,tMax,numResponseGroups,bufferSize}).
//       A second init replaces the channel.
//   {"cmd":"send","payload_hex":"..","hint_hex":".."?}
//       pushOutgoingMessage + processTasks -> {message_id, frame_hex}; the
//       callback reports success with `hint_hex` as retrieval hint.
//   {"cmd":"ephemeral","payload_hex":".."}   -> {message_id, frame_hex}
//   {"cmd":"receive","frame_hex":"..","hint_hex":".."?}
//       Message.decode + pushIncomingMessage + processTasks -> {message_id, kind}
//   {"cmd":"sync"}  pushOutgoingSyncMessage -> {sent, message_id, frame_hex|null}
//   {"cmd":"sweep"} sweepIncomingBuffer + sweepRepairIncomingBuffer ->
//       {missing: [history entries], repairs: [{message_id, frame_hex}]}
//   {"cmd":"sweep_outgoing"} -> {unacknowledged: [ids], possibly_acknowledged: [ids]}
//   {"cmd":"state"} -> {log, outgoing, incoming, lamport, possible_acks,
//       repair_requests, repair_responses, now}
//   {"cmd":"reencode","frame_hex":".."} -> Message.decode(bytes).encode():
//       {kind, frame_hex, decoded}
//   {"cmd":"message_id","payload_hex":".."} -> {message_id}
//   {"cmd":"ping"} -> {pong: true, version}
//   {"cmd":"exit"} -> replies, then exits 0 (closing stdin does the same).
import { createInterface } from "node:readline";
import { createRequire } from "node:module";

// Loaded dynamically so that a missing install is reported as an error
// reply to every command instead of a crash at startup.
let sds = null;
let loadError = null;
try {
  sds = await import("@waku/sds");
} catch (err) {
  loadError = `cannot load @waku/sds (run \`npm ci --prefix tests/interop\`): ${err?.message ?? err}`;
}
const { Message, MessageChannel, MessageChannelEvent, isContentMessage, isEphemeralMessage, isSyncMessage } = sds ?? {};

const VERSION = (() => {
  try {
    // package.json is not in the package's "exports": read it by path.
    const require = createRequire(import.meta.url);
    return require("./node_modules/@waku/sds/package.json").version;
  } catch {
    return "unknown";
  }
})();

// ---------------------------------------------------------------- encoding

const toHex = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");

function fromHex(hex, field) {
  if (typeof hex !== "string" || hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new Error(`${field} must be an even-length hex string`);
  }
  return new Uint8Array(Buffer.from(hex, "hex"));
}

function kindOf(message) {
  if (isContentMessage(message)) return "content";
  if (isSyncMessage(message)) return "sync";
  if (isEphemeralMessage(message)) return "ephemeral";
  return "unknown";
}

function historyEntry(e) {
  return {
    message_id: e.messageId,
    retrieval_hint: e.retrievalHint == null ? null : toHex(e.retrievalHint),
    sender_id: e.senderId ?? null
  };
}

function messageJson(m) {
  return {
    kind: kindOf(m),
    message_id: m.messageId,
    channel_id: m.channelId,
    sender_id: m.senderId,
    lamport_timestamp: m.lamportTimestamp == null ? null : m.lamportTimestamp.toString(),
    causal_history: (m.causalHistory ?? []).map(historyEntry),
    bloom_filter: m.bloomFilter == null ? null : toHex(m.bloomFilter),
    repair_request: (m.repairRequest ?? []).map(historyEntry),
    content: m.content == null ? null : toHex(m.content),
    retrieval_hint: m.retrievalHint == null ? null : toHex(m.retrievalHint)
  };
}

// Event details keep @waku/sds's own (camelCase) shape; a Message becomes a
// plain object of its wire fields plus `kind` ("content"|"sync"|"ephemeral").
function jsonSafe(value, depth = 0) {
  if (depth > 8) return "<too deep>";
  if (value === null || value === undefined) return null;
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number" || typeof value === "string" || typeof value === "boolean") return value;
  if (value instanceof Uint8Array) return toHex(value);
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (Array.isArray(value)) return value.map((v) => jsonSafe(v, depth + 1));
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [String(k), jsonSafe(v, depth + 1)]));
  if (value instanceof Set) return [...value].map((v) => jsonSafe(v, depth + 1));
  if (typeof value === "object") {
    const out = value instanceof Message ? { kind: kindOf(value) } : {};
    for (const [k, v] of Object.entries(value)) {
      if (typeof v !== "function") out[k] = jsonSafe(v, depth + 1);
    }
    return out;
  }
  return String(value);
}

// ------------------------------------------------------------------- state

let channel = null;
let pending = []; // events since the last reply
// @waku/sds 0.0.8's RepairManager reports "RepairRequestQueued" and
// "RepairResponseQueued" through MessageChannel.safeSendEvent under those bare
// names, not under MessageChannelEvent.RepairRequestQueued
// ("sds:repair:request-queued") / RepairResponseQueued: listen to both.
const EVENT_TYPES = [...Object.values(MessageChannelEvent ?? {}), "RepairRequestQueued", "RepairResponseQueued"];

function attach(ch) {
  for (const type of EVENT_TYPES) {
    ch.addEventListener(type, (evt) => {
      try {
        pending.push({ type, detail: jsonSafe(evt.detail) });
      } catch (err) {
        pending.push({ type, detail: null, serialize_error: String(err) });
      }
    });
  }
}

function need() {
  if (channel === null) throw new Error("no channel: send {\"cmd\":\"init\",...} first");
  return channel;
}

function errorTasks(events) {
  return events.filter((e) => e.type === MessageChannelEvent.ErrorTask);
}

// ---------------------------------------------------------------- commands

const handlers = {
  async ping() {
    return { pong: true, version: VERSION, node: process.version };
  },

  async init(cmd) {
    if (typeof cmd.channel !== "string" || typeof cmd.participant !== "string" || !cmd.participant) {
      throw new Error("init needs string `channel` and non-empty `participant`");
    }
    channel = new MessageChannel(cmd.channel, cmd.participant, cmd.options ?? {});
    attach(channel);
    return { channel: cmd.channel, participant: cmd.participant, lamport: channel.lamportTimestamp.toString() };
  },

  async send(cmd) {
    const ch = need();
    const payload = fromHex(cmd.payload_hex, "payload_hex");
    const hint = cmd.hint_hex == null ? undefined : fromHex(cmd.hint_hex, "hint_hex");
    let frame = null;
    let mid = null;
    ch.pushOutgoingMessage(payload, async (message) => {
      frame = message.encode();
      mid = message.messageId;
      return { success: true, retrievalHint: hint };
    });
    await ch.processTasks();
    if (frame === null) throw new Error("send produced no frame (see ErrorTask events)");
    return { message_id: mid, frame_hex: toHex(frame) };
  },

  async ephemeral(cmd) {
    const ch = need();
    const payload = fromHex(cmd.payload_hex, "payload_hex");
    let frame = null;
    let mid = null;
    await ch.pushOutgoingEphemeralMessage(payload, async (message) => {
      frame = message.encode();
      mid = message.messageId;
      return true;
    });
    await ch.processTasks();
    if (frame === null) throw new Error("ephemeral send produced no frame (see ErrorTask events)");
    return { message_id: mid, frame_hex: toHex(frame) };
  },

  async receive(cmd) {
    const ch = need();
    const bytes = fromHex(cmd.frame_hex, "frame_hex");
    const message = Message.decode(bytes);
    if (message === undefined) throw new Error("Message.decode returned undefined (malformed or unknown frame type)");
    const hint = cmd.hint_hex == null ? undefined : fromHex(cmd.hint_hex, "hint_hex");
    ch.pushIncomingMessage(message, hint);
    await ch.processTasks();
    return { message_id: message.messageId, kind: kindOf(message) };
  },

  async sync() {
    const ch = need();
    let frame = null;
    let mid = null;
    const sent = await ch.pushOutgoingSyncMessage(async (message) => {
      frame = message.encode();
      mid = message.messageId;
      return true;
    });
    return { sent, message_id: mid, frame_hex: frame === null ? null : toHex(frame) };
  },

  async sweep() {
    const ch = need();
    const missing = ch.sweepIncomingBuffer().map(historyEntry);
    const repairs = [];
    await ch.sweepRepairIncomingBuffer(async (message) => {
      repairs.push({ message_id: message.messageId, frame_hex: toHex(message.encode()) });
    });
    return { missing, repairs };
  },

  async sweep_outgoing() {
    const ch = need();
    const { unacknowledged, possiblyAcknowledged } = ch.sweepOutgoingBuffer();
    return {
      unacknowledged: unacknowledged.map((m) => m.messageId),
      possibly_acknowledged: possiblyAcknowledged.map((m) => m.messageId)
    };
  },

  async state() {
    const ch = need();
    const rm = ch.repairManager;
    return {
      log: ch.localHistory.slice().map((m) => m.messageId),
      log_lamports: ch.localHistory.slice().map((m) => m.lamportTimestamp.toString()),
      outgoing: ch.outgoingBuffer.map((m) => m.messageId),
      incoming: ch.incomingBuffer.map((m) => m.messageId),
      lamport: ch.lamportTimestamp.toString(),
      possible_acks: Object.fromEntries(ch.possibleAcks),
      repair_requests: rm ? rm.outgoingBuffer.getItems().map((i) => ({ ...historyEntry(i.entry), t_req: i.tReq, requested: i.requested })) : [],
      repair_responses: rm ? rm.incomingBuffer.getItems().map((i) => ({ ...historyEntry(i.entry), t_resp: i.tResp })) : [],
      now: Date.now()
    };
  },

  async reencode(cmd) {
    const bytes = fromHex(cmd.frame_hex, "frame_hex");
    const message = Message.decode(bytes);
    if (message === undefined) throw new Error("Message.decode returned undefined (malformed or unknown frame type)");
    return { kind: kindOf(message), frame_hex: toHex(message.encode()), decoded: messageJson(message) };
  },

  async message_id(cmd) {
    return { message_id: MessageChannel.getMessageId(fromHex(cmd.payload_hex, "payload_hex")) };
  }
};

// -------------------------------------------------------------------- loop

// Resolves once the line is handed to the OS: a reply is never lost to
// process.exit() and a slow reader applies back-pressure.
function write(obj) {
  let line;
  try {
    line = JSON.stringify(obj);
  } catch (err) {
    line = JSON.stringify({ cmd: obj?.cmd ?? null, id: obj?.id ?? null, error: `cannot serialize reply: ${err}`, events: [] });
  }
  return new Promise((resolve) => {
    process.stdout.write(line + "\n", () => resolve());
  });
}

function takeEvents() {
  const out = pending;
  pending = [];
  return out;
}

async function handle(line) {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (err) {
    await write({ cmd: null, id: null, error: `bad JSON: ${err.message}`, events: takeEvents() });
    return;
  }
  const base = { cmd: cmd?.cmd ?? null, id: cmd?.id ?? null };
  if (cmd === null || typeof cmd !== "object" || typeof cmd.cmd !== "string") {
    await write({ ...base, error: "a command is a JSON object with a string `cmd`", events: takeEvents() });
    return;
  }
  if (cmd.cmd === "exit") {
    await write({ ...base, ok: true, events: takeEvents() });
    process.exit(0);
  }
  if (loadError !== null) {
    await write({ ...base, error: loadError, events: [] });
    return;
  }
  const handler = Object.hasOwn(handlers, cmd.cmd) ? handlers[cmd.cmd] : undefined;
  if (!handler) {
    await write({ ...base, error: `unknown cmd ${JSON.stringify(cmd.cmd)}; known: ${Object.keys(handlers).join(", ")}, exit`, events: takeEvents() });
    return;
  }
  try {
    const result = await handler(cmd);
    const events = takeEvents();
    const errors = errorTasks(events);
    if (errors.length > 0) {
      await write({ ...base, ...result, error: `task failed: ${JSON.stringify(errors.map((e) => e.detail?.error))}`, events });
    } else {
      await write({ ...base, ok: true, ...result, events });
    }
  } catch (err) {
    await write({ ...base, error: `${err?.name ?? "Error"}: ${err?.message ?? String(err)}`, events: takeEvents() });
  }
}

process.on("uncaughtException", (err) => {
  write({ cmd: null, id: null, error: `uncaught: ${err?.stack ?? err}`, events: takeEvents() });
});
process.on("unhandledRejection", (err) => {
  write({ cmd: null, id: null, error: `unhandled rejection: ${err?.stack ?? err}`, events: takeEvents() });
});

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
for await (const line of rl) {
  if (line.trim() === "") continue;
  await handle(line);
}
// stdin closed: end without process.exit() so pending output is flushed.
rl.close();
