#!/usr/bin/env node
// A slowfs driver (protocol v1, docs/driver-protocol.md) for Node's file APIs.
//
//   node slowfs_driver.mjs --api promises    # fs.promises (FileHandle)
//   node slowfs_driver.mjs --api callbacks   # fs.open/fs.read/... with callbacks
//
// Both run every file operation on libuv's thread pool: UV_THREADPOOL_SIZE
// threads (default 4) shared by all fs calls, DNS lookups and zlib. A request
// slowfs holds keeps its pool thread, so four hung requests stall every other fs
// call of the process; set UV_THREADPOOL_SIZE before starting node to change it.
//
// Neither API can cancel an fs operation once it is in the pool (AbortSignal
// exists only for readFile/writeFile and is checked between chunks), so this
// driver answers a cancel honestly: with the operation's result when it ends.
import fs from "node:fs";
import os from "node:os";
import readline from "node:readline";

const PROTOCOL_VERSION = 1;
const api = process.argv[process.argv.indexOf("--api") + 1];
if (!process.argv.includes("--api") || !["promises", "callbacks"].includes(api)) {
  process.stderr.write("usage: node slowfs_driver.mjs --api promises|callbacks\n");
  process.exit(2);
}

/** Sleeps 1 ms at a time on the event loop and records how late it wakes (ms). */
class Heartbeat {
  constructor() {
    this.late = [];
    const tick = () => {
      const start = process.hrtime.bigint();
      setTimeout(() => {
        this.late.push(Number(process.hrtime.bigint() - start) / 1e6 - 1);
        tick();
      }, 1);
    };
    tick();
  }
  report(reset) {
    const late = [...this.late].sort((a, b) => a - b);
    if (reset) this.late = [];
    if (!late.length) return { samples: 0, p50_ms: 0, p99_ms: 0, max_ms: 0 };
    const pick = (q) => late[Math.min(late.length - 1, Math.floor(q * late.length))];
    return {
      samples: late.length, p50_ms: pick(0.5), p99_ms: pick(0.99), max_ms: late.at(-1),
      late_ms: late.filter((l) => l > 10),
    };
  }
}

function openFlags(r) {
  const c = fs.constants;
  let flags = r.read && (r.write || r.append) ? c.O_RDWR : r.write || r.append ? c.O_WRONLY : c.O_RDONLY;
  if (r.create_new) flags |= c.O_CREAT | c.O_EXCL;
  else if (r.create) flags |= c.O_CREAT;
  if (r.truncate) flags |= c.O_TRUNC;
  if (r.append) flags |= c.O_APPEND;
  return flags;
}

/** fs.promises: one FileHandle per open file. */
const promisesApi = {
  name: "node:fs.promises",
  open: (r) => fs.promises.open(r.path, openFlags(r), 0o644),
  readAt: async (fh, len, offset) => {
    const { bytesRead, buffer } = await fh.read(Buffer.alloc(len), 0, len, offset);
    return buffer.subarray(0, bytesRead);
  },
  write: async (fh, data, offset) => (await fh.write(data, 0, data.length, offset)).bytesWritten,
  fsync: (fh) => fh.sync(),
  fdatasync: (fh) => fh.datasync(),
  setLen: (fh, len) => fh.truncate(len),
  size: async (fh) => (await fh.stat()).size,
  close: (fh) => fh.close(),
};

/** A callback-style call as a promise (what the callback API's users write by hand). */
const call = (fn, ...args) =>
  new Promise((resolve, reject) => fn(...args, (err, value) => (err ? reject(err) : resolve(value))));

/** The callback API: plain fds. */
const callbacksApi = {
  name: "node:fs-callbacks",
  open: (r) => call(fs.open, r.path, openFlags(r), 0o644),
  readAt: async (fd, len, offset) => {
    const buf = Buffer.alloc(len);
    return buf.subarray(0, await call(fs.read, fd, buf, 0, len, offset));
  },
  write: (fd, data, offset) => call(fs.write, fd, data, 0, data.length, offset),
  fsync: (fd) => call(fs.fsync, fd),
  fdatasync: (fd) => call(fs.fdatasync, fd),
  setLen: (fd, len) => call(fs.ftruncate, fd, len),
  size: async (fd) => (await call(fs.fstat, fd)).size,
  close: (fd) => call(fs.close, fd),
};

const lib = api === "promises" ? promisesApi : callbacksApi;
const heartbeat = new Heartbeat();
const files = new Map();
let nextFile = 1;

async function syncDir(path) {
  const fh = await fs.promises.open(path, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function handle(r) {
  switch (r.op) {
    case "lag":
      return heartbeat.report(r.reset);
    case "open": {
      const file = nextFile++;
      files.set(file, await lib.open(r));
      return { file };
    }
    case "rename":
      await fs.promises.rename(r.from, r.to);
      return {};
    case "copy":
      await fs.promises.copyFile(r.from, r.to);
      return { n: (await fs.promises.stat(r.to)).size };
    case "remove_file":
      await fs.promises.unlink(r.path);
      return {};
    case "create_dir":
      await fs.promises.mkdir(r.path);
      return {};
    case "sync_dir":
      await syncDir(r.path);
      return {};
  }
  const f = files.get(r.file);
  switch (r.op) {
    case "read_at":
      return { data: (await lib.readAt(f, r.len, r.offset)).toString("base64") };
    case "read": // null position: at the file's cursor
      return { data: (await lib.readAt(f, r.len, null)).toString("base64") };
    case "write_at":
      return { n: await lib.write(f, Buffer.from(r.data, "base64"), r.offset) };
    case "fsync":
    case "fdatasync":
      await lib[r.op](f);
      return {};
    case "set_len":
      await lib.setLen(f, r.len);
      return {};
    case "metadata":
      return { len: await lib.size(f) };
    case "close":
      files.delete(r.file);
      await lib.close(f);
      return {};
  }
  const e = new Error(`${lib.name} has no ${r.op}`);
  e.unsupported = true;
  throw e;
}

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

async function serve(r) {
  try {
    send({ id: r.id, ok: await handle(r) });
  } catch (e) {
    if (e.unsupported) {
      send({ id: r.id, err: "unsupported", message: e.message });
    } else {
      // Node's errno is the negative number; the protocol wants it positive. The
      // number, not the code: libuv names no EDQUOT, so e.code is then
      // "Unknown system error -122" while e.errno is still -122.
      const errno = Number.isInteger(e.errno) ? Math.abs(e.errno) : (os.constants.errno[e.code] ?? 0);
      send({ id: r.id, err: e.code ?? e.name, errno, message: e.message });
    }
  }
}

send({
  hello: "slowfs-driver",
  version: PROTOCOL_VERSION,
  engine: lib.name,
  positioned: true,
  loop_thread: process.pid, // the main thread, which runs the event loop
  capabilities: ["open", "append", "read_at", "write_at", "read_many", "write_many", "read", "fsync",
    "fdatasync", "set_len", "metadata", "close", "rename", "remove_file", "create_dir",
    "sync_dir", "copy", "cancel", "lag"],
});
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  const r = JSON.parse(line);
  if ("cancel" in r) return; // cannot cancel: the operation answers when it ends
  serve(r);
});
lines.on("close", () => process.exit(0));
