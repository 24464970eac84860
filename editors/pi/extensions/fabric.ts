// fabric-lsp inside Pi: the live Pi commits the compactions an editor asks for, and every
// compaction Pi persists (manual /compact, threshold, overflow) is the deterministic
// Fabric summary that fabric-lsp's preview shows, byte for byte.
//
// Only `import type` from Pi and node built-ins: Pi loads this file as it is. The work is
// done by `fabric-lsp pi <action>` (one JSON object on stdin, one on stdout), found through
// $FABRIC_LSP_COMMAND (a command line), else ../fabric-lsp.json beside this file (written by
// `fabric-lsp pi install`), else `fabric-lsp` on PATH. See docs/pi.md.
//
// Pi 0.80.6 and Pi 1.x are told apart by what Pi does, never by its version string: where
// Pi offers the `agent_before_settle` boundary (1.x), a pending intent (or a configured
// threshold) is committed there as a compaction *draft* Pi appends itself, inside the run,
// with nothing aborted; elsewhere (0.80.6, an aborted 1.x run, an idle Pi) through
// `ctx.compact()`, called only when Pi is idle with no input pending, checked in the same
// synchronous step as the call. A prompt that arrives while such a compaction is being
// computed makes it back off (the intent stays pending for the next boundary).
//
// Nothing of the project Pi runs in is executed, whatever its trust: the program is an
// absolute path (a bare name is looked up in PATH's absolute directories only; a relative
// path is refused), a Python interpreter running `-m` gets `-I` (isolated: the current
// directory is not on sys.path), and every child runs in this extension's own directory,
// never in the project.
//
// Rules kept here: a handler never throws (a throwing session_before_compact makes Pi fall
// back to an LLM summary, so failures answer {cancel: true}, or, for an automatic
// compaction, let Pi's own compactor run and say so in the status line); stdout is
// collected as bytes and decoded once (multi-byte characters split across chunks stay
// whole); the session is held (a lease) even when fabric-lsp cannot be run, so nothing
// appends to it from outside; one status line (`setStatus("fabric-lsp", …)`) says what
// the bridge is doing.

import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  accessSync,
  constants as fsConstants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
  watch,
  writeFileSync,
  type FSWatcher,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, delimiter, dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";

const PI_VCC_SENTINEL = "__pi_vcc__";
const POLL_MS = 1000;
const TIMEOUT_MS = 120_000;
const NOTIFY_MAX_BYTES = 512;
const STATUS_KEY = "fabric-lsp";
const STATUS_MAX_BYTES = 400;
// A prompt being prepared (Pi's `input` event seen while idle, no run started yet) blocks
// idle commits for at most this long (a prompt that was handled without a run ends it).
const PREFLIGHT_MS = 30_000;
// A compaction Pi runs by itself (its `session_before_compact` seen, no end seen) blocks
// idle commits for at most this long (0.80.6 reports no failed compaction to extensions).
const PI_COMPACTING_MS = 120_000;
// fabric-lsp could not be run: asked again at a settled boundary at most this often.
const RETRY_MS = 30_000;
// Why a bridge compaction was given up: a prompt came in (the intent stays pending).
const BACKED_OFF = "fabric-lsp: backed off, a prompt came in";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Split a command line into words: whitespace separates, '…' and "…" quote. */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let quote: string | null = null;
  let has = false;
  for (const ch of line) {
    if (quote) {
      if (ch === quote) quote = null;
      else word += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      has = true;
    } else if (/\s/.test(ch)) {
      if (has || word) words.push(word);
      word = "";
      has = false;
    } else {
      word += ch;
    }
  }
  if (has || word) words.push(word);
  return words;
}

/** The directory of this file; undefined when the loader does not tell (never the cwd). */
function extensionDir(): string | undefined {
  try {
    return dirname(fileURLToPath(import.meta.url));
  } catch {
    return typeof __dirname === "string" ? __dirname : undefined;
  }
}

let ownDir: string | undefined;

/** The working directory of every child: this extension's own directory (or, when the
 * loader hides it, a private temporary directory made once, mode 0700): never the
 * project Pi runs in. */
export function spawnDir(): string {
  if (ownDir) return ownDir;
  const dir = extensionDir();
  try {
    if (dir && isAbsolute(dir) && statSync(dir).isDirectory()) return (ownDir = dir);
  } catch {
    // fall through to a directory of our own
  }
  ownDir = mkdtempSync(join(tmpdir(), "fabric-lsp-pi-"));
  return ownDir;
}

const PYTHON_NAME = /^(python|pypy)[0-9.]*w?(\.exe)?$/i;

/** `<python> [options] -m <module> …` without `-I` gets `-I` right after the interpreter,
 * so the current directory never comes first on sys.path (fabric-lsp.json files written by
 * older `fabric-lsp pi install` lack it; so does a hand-written FABRIC_LSP_COMMAND). Any
 * other command (a script, `-c`, a console script) is returned unchanged. */
export function isolatePython(argv: string[]): string[] {
  if (argv.length < 3 || !PYTHON_NAME.test(basename(argv[0]))) return argv;
  for (let i = 1; i < argv.length; i++) {
    const word = argv[i];
    if (word === "-m") return [argv[0], "-I", ...argv.slice(1)];
    if (!/^-[A-Za-z]+$/.test(word)) return argv; // a script, or an option we do not know
    if (word.slice(1).includes("I")) return argv; // isolated already
    if (word.slice(1).includes("c")) return argv; // -c code: no module to isolate
    if (word === "-X" || word === "-W") i++; // an option whose value is the next word
  }
  return argv;
}

/** The absolute path of the program `word` names. An absolute path stays as it is; a bare
 * name is looked up in PATH's absolute directories only (an empty or relative entry would
 * mean the directory Pi runs in); a relative path is refused. Throws with what to do. */
export function resolveProgram(word: string, from: string, pathEnv: string = process.env.PATH ?? ""): string {
  if (!word) throw new Error(`${from}: the command is empty`);
  if (isAbsolute(word)) return word;
  if (word.includes("/") || (process.platform === "win32" && word.includes("\\"))) {
    throw new Error(
      `${from}: "${word}" is a relative path; name the program by an absolute path ` +
        "(a relative one would be looked up in the project Pi runs in)",
    );
  }
  const exts = process.platform === "win32" ? ["", ...(process.env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";")] : [""];
  for (const dir of pathEnv.split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    for (const ext of exts) {
      const candidate = join(dir, word + ext);
      try {
        if (!statSync(candidate).isFile()) continue;
        accessSync(candidate, fsConstants.X_OK);
        return candidate;
      } catch {
        // not there, or not executable: the next directory
      }
    }
  }
  throw new Error(
    `${from}: "${word}" is not in any absolute PATH directory; run \`fabric-lsp pi install\` ` +
      "or set FABRIC_LSP_COMMAND to an absolute command (e.g. /opt/venv/bin/python -I -m fabric_lsp)",
  );
}

/** The argv that runs fabric-lsp: an absolute program, Python isolated (see above). */
export function resolveCommand(argv: string[], from: string): string[] {
  if (!argv.length) throw new Error(`${from}: the command is empty`);
  return isolatePython([resolveProgram(argv[0], from), ...argv.slice(1)]);
}

/** The command that runs fabric-lsp as configured (not yet resolved), and where it came from. */
export function fabricCommand(): { argv: string[]; from: string } {
  const env = process.env.FABRIC_LSP_COMMAND;
  if (env && env.trim()) return { argv: splitCommandLine(env.trim()), from: "FABRIC_LSP_COMMAND" };
  const here = extensionDir();
  for (const candidate of here ? [join(here, "..", "fabric-lsp.json"), join(here, "fabric-lsp.json")] : []) {
    try {
      if (!existsSync(candidate)) continue;
      const cfg = JSON.parse(readFileSync(candidate, "utf8"));
      if (Array.isArray(cfg.command) && cfg.command.length && cfg.command.every((w: unknown) => typeof w === "string")) {
        return { argv: cfg.command, from: candidate };
      }
    } catch {
      // a broken config falls through to PATH
    }
  }
  return { argv: ["fabric-lsp"], from: "PATH" };
}

/** fabric-lsp could not be run at all, or gave no answer (not installed, a wrong command,
 * a crash before any output): the bridge then holds the session by itself. */
export class EngineUnavailable extends Error {}

/** Run `fabric-lsp pi <action>` with `payload` on stdin; the parsed stdout object. Rejects
 * with EngineUnavailable when fabric-lsp cannot be started or answers no JSON, with a plain
 * Error when it answers `{error}`. */
export function runFabric(action: string, payload: Json, signal?: AbortSignal): Promise<Json> {
  const configured = fabricCommand();
  const from = configured.from;
  return new Promise((resolve, reject) => {
    let argv: string[];
    let cwd: string;
    try {
      argv = resolveCommand(configured.argv, from);
      cwd = spawnDir();
    } catch (err) {
      reject(new EngineUnavailable(`cannot start fabric-lsp: ${(err as Error).message}`));
      return;
    }
    let child;
    try {
      child = spawn(argv[0], [...argv.slice(1), "pi", action], {
        stdio: ["pipe", "pipe", "pipe"],
        env: process.env,
        cwd, // never the project: nothing there is found as a module or a program
        shell: false,
      });
    } catch (err) {
      reject(new EngineUnavailable(`cannot start fabric-lsp (${argv[0]}, from ${from}): ${(err as Error).message}`));
      return;
    }
    const out: Buffer[] = [];
    const errs: Buffer[] = [];
    let done = false;
    const finish = (fn: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      fn();
    };
    const onAbort = () => {
      child.kill("SIGTERM");
      finish(() => reject(new Error("fabric-lsp was stopped: the operation was aborted")));
    };
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish(() => reject(new Error(`fabric-lsp pi ${action} did not answer within ${TIMEOUT_MS / 1000}s`)));
    }, TIMEOUT_MS);
    signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => errs.push(chunk));
    child.on("error", (err: NodeJS.ErrnoException) => {
      const why = err.code === "ENOENT" ? "not found" : err.message;
      finish(() => reject(new EngineUnavailable(`cannot start fabric-lsp (${argv[0]}, from ${from}): ${why}`)));
    });
    child.on("close", (code: number | null) => {
      finish(() => {
        const text = Buffer.concat(out).toString("utf8"); // decoded once, never per chunk
        let value: Json;
        try {
          value = JSON.parse(text);
        } catch {
          const stderr = Buffer.concat(errs).toString("utf8").trim().split("\n").slice(-3).join(" ");
          reject(new EngineUnavailable(`fabric-lsp pi ${action} failed (exit ${code}): ${stderr || "no output"}`));
          return;
        }
        if (value && typeof value === "object" && value.error) {
          reject(new Error(String(value.error.message ?? value.error)));
          return;
        }
        resolve(value);
      });
    });
    child.stdin.on("error", () => {
      // the child exited before reading everything: its exit status tells what happened
    });
    child.stdin.end(Buffer.from(JSON.stringify(payload ?? {}), "utf8"));
  });
}

function clip(message: string, maxBytes = NOTIFY_MAX_BYTES): string {
  const buf = Buffer.from(message, "utf8");
  if (buf.length <= maxBytes) return message;
  let cut = maxBytes - 3;
  while (cut > 0 && (buf[cut] & 0xc0) === 0x80) cut--;
  return buf.subarray(0, cut).toString("utf8") + "...";
}

function piVersion(): string | undefined {
  // process.argv[1] is Pi's dist/cli.js: its package.json carries the version
  let dir = process.argv[1] ? dirname(process.argv[1]) : "";
  for (let i = 0; dir && i < 5; i++, dir = dirname(dir)) {
    const candidate = join(dir, "package.json");
    try {
      const pkg = JSON.parse(readFileSync(candidate, "utf8"));
      if (pkg.name === "@earendil-works/pi-coding-agent") return String(pkg.version);
    } catch {
      // keep looking
    }
  }
  return undefined;
}

function modelOf(ctx: ExtensionContext): Json {
  const m = ctx.model as Json;
  if (!m) return undefined;
  return { provider: m.provider, id: m.id, contextWindow: m.contextWindow };
}

function trusted(ctx: ExtensionContext): boolean {
  try {
    return ctx.isProjectTrusted();
  } catch {
    return false;
  }
}

// -- leases written here (fabric-lsp cannot be run) -------------------------------------
// The same file `fabric-lsp pi hold` writes (fabric_lsp/engine/session/lease.py):
// <agentDir>/fabric-lsp/leases/<sha256(realpath(session))[:32]>.<pid>.json, naming this
// process by pid, user and start time, so every fabric-lsp (an editor's server, the CLI)
// sees the session as held and never appends to it.

/** Pi's agent dir: $PI_CODING_AGENT_DIR (a leading ~ expanded) or ~/.pi/agent. */
export function agentDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.PI_CODING_AGENT_DIR;
  if (dir) return dir === "~" ? homedir() : dir.startsWith("~/") ? join(homedir(), dir.slice(2)) : dir;
  return join(homedir(), ".pi", "agent");
}

/** The path as Python's os.path.realpath gives it, also for a file not written yet. */
export function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    try {
      return join(realpathSync(dirname(path)), basename(path));
    } catch {
      return path;
    }
  }
}

/** The lease file name's key of a session: sha256 of its realpath, first 32 hex digits. */
export function leaseKey(session: string): string {
  return createHash("sha256").update(realPath(session), "utf8").digest("hex").slice(0, 32);
}

/** Field 22 (start time in clock ticks) of /proc/<pid>/stat, undefined when unknown. */
function procStartTicks(pid: number | "self"): number | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, "latin1");
    const fields = raw.slice(raw.lastIndexOf(")") + 2).split(/\s+/);
    const ticks = Number(fields[19]);
    return Number.isInteger(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}

/** This process's identity as fabric-lsp records it: {uid, processStart, startTime}. */
export function processIdentity(): { uid?: number; processStart?: string; startTime?: number } {
  const uid = typeof process.geteuid === "function" ? process.geteuid() : undefined;
  const ticks = procStartTicks("self");
  if (ticks !== undefined) {
    let boot = "?";
    try {
      boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || "?";
    } catch {
      // no boot id: "?" as fabric-lsp writes it
    }
    return { uid, processStart: `linux:${boot}:${ticks}`, startTime: ticks };
  }
  try {
    const out = execFileSync("ps", ["-o", "uid=,lstart=", "-p", String(process.pid)], {
      env: { ...process.env, LC_ALL: "C", LANG: "C", TZ: "UTC0" },
      encoding: "utf8",
      timeout: 10_000,
      cwd: spawnDir(),
    });
    const line = out.split("\n").find((l) => l.trim()) ?? "";
    const m = /^\s*(\d+)\s+(.*)$/.exec(line);
    if (m) return { uid: Number(m[1]), processStart: `ps:${m[2].trim().split(/\s+/).join(" ")}` };
  } catch {
    // liveness and user only
  }
  return { uid };
}

/** Write (replace atomically, 0600, directories 0700) this process's lease on `session`. */
export function writeLease(dir: string, session: string, fields: Json): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const name = `${leaseKey(session)}.${process.pid}.json`;
  const path = join(dir, name);
  const tmp = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  writeFileSync(tmp, JSON.stringify({ session: realPath(session), pid: process.pid, ...fields }), { mode: 0o600 });
  renameSync(tmp, path);
  return path;
}

/** The other live Pis that hold `session` according to the leases in `dir` (a pid whose
 * process runs and, where /proc tells, started when its lease says). */
export function otherHolders(dir: string, session: string): { pid: number; piVersion?: string; since?: number }[] {
  const key = leaseKey(session);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: { pid: number; piVersion?: string; since?: number }[] = [];
  for (const name of names) {
    if (!name.startsWith(key + ".") || !name.endsWith(".json")) continue;
    const pid = Number(name.slice(key.length + 1, -".json".length));
    if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      continue; // gone, or another user's
    }
    let lease: Json;
    try {
      lease = JSON.parse(readFileSync(join(dir, name), "utf8"));
    } catch {
      continue;
    }
    const ticks = procStartTicks(pid);
    if (ticks !== undefined && typeof lease.startTime === "number" && lease.startTime !== ticks) continue; // pid reused
    out.push({ pid, piVersion: lease.piVersion, since: lease.since });
  }
  return out.sort((a, b) => (a.since ?? 0) - (b.since ?? 0) || a.pid - b.pid);
}

/** `compaction.engine` of <agentDir>/fabric.json ("fabric" when unset or unreadable): read
 * here only when fabric-lsp cannot be run. */
function configuredEngine(): string {
  try {
    const cfg = JSON.parse(readFileSync(join(agentDir(), "fabric.json"), "utf8"));
    return typeof cfg?.compaction?.engine === "string" ? cfg.compaction.engine : "fabric";
  } catch {
    return "fabric";
  }
}

/** Pi's compaction settings for a model as Pi resolves them (1.x: `compaction.modelOverrides`
 * per `provider/id`, then `compaction`, then Pi's defaults), from `pi.getSettings()`. */
export function compactionSettings(settings: Json, modelKey: string | undefined): Json {
  const c = settings?.compaction ?? {};
  const over = (modelKey && c.modelOverrides && typeof c.modelOverrides === "object" && c.modelOverrides[modelKey]) || {};
  const pick = (field: string, fallback: number) =>
    typeof over[field] === "number" ? over[field] : typeof c[field] === "number" ? c[field] : fallback;
  return { reserveTokens: pick("reserveTokens", 16384), keepRecentTokens: pick("keepRecentTokens", 20000) };
}

/** The one status line: what is wrong first (it may be cut at the terminal's width), then
 * what the bridge does, with the way out. */
export function statusText(s: {
  engine: "ok" | "missing" | "unknown";
  engineMessage?: string;
  engineError?: string;
  piFailure?: string;
  deferringTo?: number;
  others?: { pid: number; piVersion?: string }[];
}): string {
  const parts: string[] = [];
  if (s.others?.length) {
    const pids = s.others.map((o) => `pid ${o.pid}`).join(", ");
    parts.push(`fabric-lsp WARNING: another Pi (${pids}) has this session open, the next prompt in either forks the file; close one`);
  }
  if (s.engine === "missing") {
    parts.push(
      `fabric-lsp: engine not found, /compact is cancelled and Pi compacts by itself; fix: fabric-lsp pi install, ` +
        `or compaction.engine: "pi" in fabric.json (${s.engineMessage ?? "fabric-lsp cannot be run"})`,
    );
  } else if (s.engineError) {
    parts.push(
      `fabric-lsp: engine error, Pi's own compactor ran for the automatic compaction; compaction.engine: "pi" ` +
        `in fabric.json makes that the rule (${s.engineError})`,
    );
  } else if (s.deferringTo !== undefined) {
    parts.push(`fabric-lsp: bridge active, deferring Pi's threshold compaction to ${Math.round(s.deferringTo)} tokens`);
  } else {
    parts.push("fabric-lsp: bridge active");
  }
  if (s.piFailure) parts.push(`Pi's last compaction failed: ${s.piFailure}`);
  return clip(parts.join(" | "), STATUS_MAX_BYTES);
}

export default function fabric(pi: ExtensionAPI): void {
  const version = piVersion();
  const api = pi as Json;
  let ctxRef: ExtensionContext | undefined;
  let sessionFile: string | undefined;
  let stateFile: string | undefined;
  let leaseDir: string | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  let watcher: FSWatcher | undefined;
  let watchedDir: string | undefined;
  let busy = false;
  let lastPendingSeen: string | undefined;
  let lastStateMtime = -1;
  // why the last Fabric compute did not produce a compaction (for the intent's record)
  let lastCancel: string | undefined;
  const notified = new Set<string>();

  // what the status line shows
  let engine: "ok" | "missing" | "unknown" = "unknown";
  let engineMessage: string | undefined;
  let engineError: string | undefined;
  let piFailure: string | undefined;
  let deferringTo: number | undefined;
  // seed 002's configured threshold for the live model (fabric-lsp says it at hold)
  let thresholdTokens: number | undefined;
  let missingSince = 0; // fabric-lsp could not be run: asked again at most every RETRY_MS
  let others: { pid: number; piVersion?: string }[] = [];
  const warnedPeers = new Set<number>();
  let shownStatus: string | undefined;

  // the lease: its live leaf follows every entry Pi appends
  let ownLease = false; // written here, fabric-lsp could not be run
  // this process's identity as fabric-lsp recorded it in the lease (reused for every
  // rewrite of the leaf, so the lease stays live wherever fabric-lsp's check differs)
  let identity: Json;
  let leaseSince = 0;
  let heldLeaf: string | null | undefined; // the leaf the lease names (last completed write)

  // Pi's activity as the bridge must see it before calling ctx.compact()
  let promptAt = 0; // an `input` came while Pi was idle: a prompt is being prepared
  let piCompactingAt = 0; // Pi runs a compaction of its own (session_before_compact seen)
  let bridgeCompaction: { promptArrived: boolean; done: Promise<void> } | undefined;
  // Pi 1.x: a compaction handed to Pi as a draft at agent_before_settle, to record at agent_settled
  let draft: { intentId?: string; summary: string } | undefined;

  const notify = (ctx: ExtensionContext | undefined, message: string, level: "info" | "warning" | "error") => {
    const text = clip(message);
    if (level !== "info" && notified.has(text)) return; // once per distinct problem
    if (level !== "info") notified.add(text);
    try {
      if (ctx?.hasUI) ctx.ui.notify(text, level);
    } catch {
      // a UI that went away must not break the handler
    }
  };

  const render = (ctx: ExtensionContext | undefined = ctxRef) => {
    const text = statusText({ engine, engineMessage, engineError, piFailure, deferringTo, others });
    if (text === shownStatus) return;
    try {
      if (ctx?.hasUI) {
        ctx.ui.setStatus(STATUS_KEY, text);
        shownStatus = text;
      }
    } catch {
      // no UI
    }
  };

  const setOthers = (ctx: ExtensionContext | undefined, found: { pid: number; piVersion?: string }[]) => {
    others = found;
    for (const o of found) {
      if (warnedPeers.has(o.pid)) continue;
      warnedPeers.add(o.pid);
      notify(ctx, `fabric-lsp: another Pi (pid ${o.pid}) has this session open too: each Pi appends under its own ` +
        "leaf, so the next prompt in either forks the file and drops the other's turns from the active branch. " +
        "Close one of them.", "warning");
    }
    render(ctx);
  };

  const leafOf = (ctx: ExtensionContext): string | undefined => safe(() => ctx.sessionManager.getLeafId()) ?? undefined;

  const base = (ctx: ExtensionContext): Json => ({
    session: sessionFile,
    pid: process.pid,
    piVersion: version,
    sessionId: safe(() => ctx.sessionManager.getSessionId()),
    leafId: leafOf(ctx),
    cwd: ctx.cwd,
    trusted: trusted(ctx),
    model: modelOf(ctx),
  });

  /** Write this Pi's lease here (the file fabric-lsp reads): its leaf after each append, and
   * the whole lease when fabric-lsp cannot be run. */
  const holdHere = (ctx: ExtensionContext, leaf: string | undefined) => {
    if (!sessionFile) return;
    const now = Date.now();
    if (!leaseSince) leaseSince = now;
    try {
      leaseDir = leaseDir ?? join(agentDir(), "fabric-lsp", "leases");
      identity = identity ?? processIdentity();
      writeLease(leaseDir, sessionFile, {
        ...identity,
        piVersion: version,
        sessionId: safe(() => ctx.sessionManager.getSessionId()),
        leafId: leaf,
        since: leaseSince,
        updatedAt: now,
      });
    } catch (err) {
      notify(ctx, `fabric-lsp: cannot hold this session: ${(err as Error).message}`, "warning");
    }
  };

  /** A fabric-lsp answer that carries the lease and the holders: take what it says. */
  const took = (ctx: ExtensionContext, r: Json, leaf: string | undefined) => {
    engine = "ok";
    engineMessage = undefined;
    ownLease = false;
    heldLeaf = leaf;
    if (r?.stateFile) stateFile = r.stateFile;
    if (r?.leaseDir) leaseDir = r.leaseDir;
    if (r?.lease?.since) leaseSince = r.lease.since;
    if (r?.lease && typeof r.lease === "object") {
      identity = { uid: r.lease.uid, processStart: r.lease.processStart, startTime: r.lease.startTime };
    }
    thresholdTokens = typeof r?.thresholdTokens === "number" && !r.defersPiThreshold ? r.thresholdTokens : undefined;
    deferringTo = typeof r?.thresholdTokens === "number" && r.defersPiThreshold ? r.thresholdTokens : undefined;
    if (Array.isArray(r?.holders)) setOthers(ctx, r.holders);
    watchState();
  };

  const hold = async (ctx: ExtensionContext) => {
    if (!sessionFile) return;
    const leaf = leafOf(ctx);
    try {
      took(ctx, await runFabric("hold", { ...base(ctx), leafId: leaf }), leaf);
    } catch (err) {
      if (err instanceof EngineUnavailable) {
        engine = "missing";
        engineMessage = clip((err as Error).message, 160);
        missingSince = now();
        holdHere(ctx, leaf);
        ownLease = true;
        heldLeaf = leaf;
        notify(ctx, `fabric-lsp: ${(err as Error).message}`, "warning");
      } else {
        heldLeaf = leaf; // a refusal (pid 1, …) does not get better by asking again
        notify(ctx, `fabric-lsp: cannot hold this session: ${(err as Error).message}`, "warning");
      }
    }
    render(ctx);
  };

  // The lease's leaf follows Pi's leaf: after every entry Pi appends (message_end, tool
  // results, compactions, /tree) and at every poll, the lease file is rewritten here with
  // Pi's leaf (the same file `fabric-lsp pi hold` writes; no process to start).
  const kickLeaf = () => {
    const ctx = ctxRef;
    if (!ctx || !sessionFile || engine === "unknown") return;
    const leaf = leafOf(ctx);
    if (leaf === heldLeaf) return;
    holdHere(ctx, leaf);
    heldLeaf = leaf;
  };
  const kickSoon = () => {
    setTimeout(kickLeaf, 0); // after Pi has persisted the entry this event announces
  };

  const now = () => Date.now();
  const promptPending = () => promptAt > 0 && now() - promptAt < PREFLIGHT_MS;
  const piCompacting = () => piCompactingAt > 0 && now() - piCompactingAt < PI_COMPACTING_MS;

  /** Whether ctx.compact() may run now without touching a turn: Pi idle, nothing queued, no
   * prompt being prepared, no compaction running. Called in the same synchronous step as
   * ctx.compact(): nothing can start in between. */
  const quiet = (ctx: ExtensionContext): boolean => {
    try {
      return ctx.isIdle() && !ctx.hasPendingMessages() && !promptPending() && !piCompacting() && !bridgeCompaction;
    } catch {
      return false;
    }
  };

  /** Run Pi's compact() for the bridge; the caller has just checked quiet(ctx). */
  const compactNow = (ctx: ExtensionContext, customInstructions: string | undefined): Promise<Json> => {
    let release: () => void = () => {};
    const flight = { promptArrived: false, done: new Promise<void>((r) => (release = r)) };
    bridgeCompaction = flight;
    return new Promise<Json>((resolve) => {
      lastCancel = undefined;
      const end = (value: Json) => {
        if (bridgeCompaction === flight) bridgeCompaction = undefined;
        release();
        resolve(value);
      };
      try {
        ctx.compact({
          customInstructions,
          onComplete: (result) => end({ result }),
          onError: (error) => end({ error }),
        });
      } catch (error) {
        end({ error });
      }
    });
  };

  const finish = async (ctx: ExtensionContext, payload: Json) => {
    try {
      await runFabric("finish", { ...base(ctx), ...payload });
    } catch (err) {
      notify(ctx, `fabric-lsp: cannot record the compaction outcome: ${(err as Error).message}`, "error");
    }
  };

  const unclaim = async (ctx: ExtensionContext, intentId: string) => {
    lastPendingSeen = undefined; // tried again at the next boundary
    try {
      await runFabric("unclaim", { ...base(ctx), intentId });
    } catch {
      // a claim of a process that is gone is void anyway; this one ends with Pi
    }
  };

  const commitClaim = async (ctx: ExtensionContext, claim: Json) => {
    const outcome = await compactNow(ctx, claim.customInstructions ?? undefined);
    if (!outcome.result && lastCancel === BACKED_OFF) {
      await unclaim(ctx, claim.intentId);
      return;
    }
    const payload: Json = { intentId: claim.intentId };
    if (outcome.result) {
      const r = outcome.result;
      payload.committed = {
        entryId: leafOf(ctx),
        summary: r.summary,
        tokensBefore: r.tokensBefore,
        estimatedTokensAfter: typeof r.estimatedTokensAfter === "number" ? r.estimatedTokensAfter : undefined,
        projectedTokensAfter: typeof r.details?.budget?.projectedTokensAfter === "number"
          ? r.details.budget.projectedTokensAfter : undefined,
      };
    } else {
      const message = (outcome.error as Error)?.message ?? String(outcome.error);
      payload.error = message === "Compaction cancelled" && lastCancel ? lastCancel : message;
    }
    await finish(ctx, payload);
  };

  /** Pi 1.x: the compaction draft appended at agent_before_settle is in the branch now. */
  const recordDraft = async (ctx: ExtensionContext) => {
    const d = draft;
    draft = undefined;
    if (!d?.intentId) return;
    const branch: Json[] = safe(() => ctx.sessionManager.getBranch()) ?? [];
    const entry = [...branch].reverse().find((e) => e?.type === "compaction" && e.summary === d.summary);
    if (!entry) {
      await unclaim(ctx, d.intentId); // Pi dropped the draft: ctx.compact() at the next boundary
      return;
    }
    await finish(ctx, {
      intentId: d.intentId,
      committed: {
        entryId: entry.id, summary: entry.summary, tokensBefore: entry.tokensBefore,
        projectedTokensAfter: typeof entry.details?.budget?.projectedTokensAfter === "number"
          ? entry.details.budget.projectedTokensAfter : undefined,
      },
    });
  };

  /** A pending intent this Pi has not taken yet, read from the intent state file. */
  const pendingIntent = (): boolean => {
    if (!stateFile) return false;
    try {
      const state = JSON.parse(readFileSync(stateFile, "utf8"));
      return typeof state.pendingId === "string" && state.pendingId !== lastPendingSeen;
    } catch {
      return false; // none yet, or being replaced (the watcher looks again)
    }
  };

  /** Seed 002's configured threshold below Pi's own is reached. */
  const thresholdDue = (ctx: ExtensionContext): boolean => {
    if (thresholdTokens === undefined) return false;
    const tokens = safe(() => ctx.getContextUsage())?.tokens;
    return typeof tokens === "number" && tokens >= thresholdTokens;
  };

  // One settled boundary (agent_settled, or an idle Pi that sees a new intent): refresh the
  // lease, commit a pending intent, or compact at a configured threshold below Pi's own.
  // Serialized: one at a time.
  const settle = async (ctx: ExtensionContext) => {
    if (busy || !sessionFile) return;
    busy = true;
    try {
      if (draft) await recordDraft(ctx);
      const usage = safe(() => ctx.getContextUsage());
      const leaf = leafOf(ctx);
      let r: Json;
      try {
        r = await runFabric("settled", { ...base(ctx), leafId: leaf, usage, model: modelOf(ctx) });
      } catch (err) {
        if (err instanceof EngineUnavailable) {
          if (engine !== "missing") await hold(ctx); // lost it: hold here, say so
          return;
        }
        throw err;
      }
      took(ctx, r, leaf);
      render(ctx);
      if (r.claim) {
        lastPendingSeen = r.claim.intentId;
        // The final check, in the same synchronous step as ctx.compact(): a prompt that came
        // in while fabric-lsp claimed the intent wins, the intent waits for its boundary.
        if (!quiet(ctx)) {
          await unclaim(ctx, r.claim.intentId);
          return;
        }
        await commitClaim(ctx, r.claim);
        kickSoon();
      } else if (r.thresholdCompact && quiet(ctx)) {
        await compactNow(ctx, undefined);
        kickSoon();
      }
    } catch (err) {
      notify(ctx, `fabric-lsp: ${(err as Error).message}`, "error");
    } finally {
      busy = false;
    }
  };

  // While Pi is idle, an intent requested from an editor is committed at once: the state
  // file's directory is watched (the file is replaced atomically, so the event names it),
  // and a once-a-second look covers file systems whose events do not arrive. The same look
  // moves the lease's leaf and notices another Pi on this session.
  const poll = () => {
    const ctx = ctxRef;
    if (!ctx) return;
    kickLeaf();
    if (leaseDir && sessionFile) {
      const found = otherHolders(leaseDir, sessionFile);
      if (found.map((o) => o.pid).join() !== others.map((o) => o.pid).join()) setOthers(ctx, found);
    }
    if (busy || !stateFile || !quiet(ctx)) return;
    try {
      let mtime: number;
      try {
        mtime = statSync(stateFile).mtimeMs;
      } catch {
        return; // no intent state for this session
      }
      if (mtime === lastStateMtime) return;
      const state = JSON.parse(readFileSync(stateFile, "utf8"));
      lastStateMtime = mtime; // only once read whole: a failed read is tried again
      const pending = typeof state.pendingId === "string" ? state.pendingId : undefined;
      if (!pending || pending === lastPendingSeen) return;
      void settle(ctx);
    } catch {
      // a state file being replaced is read again at the next tick
    }
  };

  const unwatch = () => {
    watcher?.close();
    watcher = undefined;
    watchedDir = undefined;
  };

  const watchState = () => {
    if (!stateFile) return;
    const dir = dirname(stateFile);
    if (watcher && watchedDir === dir) return;
    unwatch();
    try {
      const w = watch(dir, { persistent: false }, (_event, name) => {
        if (!name || !stateFile || String(name) === basename(stateFile)) poll();
      });
      w.on("error", () => {
        if (watcher === w) unwatch(); // the interval still looks every second
      });
      watcher = w;
      watchedDir = dir;
    } catch {
      // no directory yet or no watch support: the interval looks every second
    }
  };

  const release = async (cwd: string | undefined) => {
    const file = sessionFile;
    if (!file) return;
    if (ownLease && leaseDir) {
      try {
        unlinkSync(join(leaseDir, `${leaseKey(file)}.${process.pid}.json`));
      } catch {
        // gone already
      }
      ownLease = false;
      return;
    }
    try {
      await runFabric("release", { session: file, pid: process.pid, cwd });
    } catch {
      // a lease whose process is gone is ignored anyway
    }
  };

  const start = async (ctx: ExtensionContext) => {
    const file = safe(() => ctx.sessionManager.getSessionFile());
    if (sessionFile && file !== sessionFile) await release(ctx.cwd); // /new, /resume, a fork
    ctxRef = ctx;
    sessionFile = file;
    lastPendingSeen = undefined;
    lastStateMtime = -1;
    leaseSince = 0;
    heldLeaf = undefined;
    others = [];
    await hold(ctx);
    if (!timer) {
      timer = setInterval(poll, POLL_MS);
      timer.unref?.();
    }
  };

  pi.on("session_start", async (_event, ctx) => {
    await start(ctx);
  });

  pi.on("session_shutdown", async (_event, ctx) => {
    if (timer) clearInterval(timer);
    timer = undefined;
    unwatch();
    ctxRef = undefined;
    await release(ctx.cwd);
  });

  // A prompt is being prepared (Pi runs input handlers before the run starts, and isIdle()
  // is still true then): no idle commit until its run starts. A prompt that comes while
  // the bridge's own compaction runs (Pi 0.80.6 lets it) waits for it; the compaction
  // backs off if it has not been appended yet.
  pi.on("input", async (_event, ctx) => {
    if (safe(() => ctx.isIdle())) promptAt = now();
    const flight = bridgeCompaction;
    if (flight) {
      flight.promptArrived = true;
      await flight.done;
    }
    return { action: "continue" };
  });

  pi.on("agent_start", async () => {
    promptAt = 0; // the run started: isIdle() says the rest
  });

  for (const event of ["message_end", "tool_execution_end", "turn_end"] as const) {
    (pi.on as Json)(event, async () => {
      kickSoon();
      return undefined;
    });
  }

  // Pi 1.x: the boundary before a run settles. A pending intent (or a configured threshold
  // below Pi's own) is committed here as a compaction draft Pi appends itself: inside the
  // run, no abort, no ctx.compact(). Pi 0.80.6 never emits this event.
  (pi.on as Json)("agent_before_settle", async (event: Json, ctx: ExtensionContext) => {
    ctxRef = ctx;
    if (!sessionFile || engine === "missing" || busy) return undefined;
    if (Array.isArray(event?.entries) && event.entries.some((e: Json) => e?.type === "compaction")) return undefined;
    if (!pendingIntent() && !thresholdDue(ctx)) return undefined; // nothing to do: no process started
    busy = true;
    let claim: Json;
    try {
      const leaf = leafOf(ctx);
      const r = await runFabric("settled", {
        ...base(ctx),
        leafId: leaf,
        usage: safe(() => ctx.getContextUsage()),
        model: modelOf(ctx),
      });
      took(ctx, r, leaf);
      render(ctx);
      claim = r.claim;
      if (!claim && !r.thresholdCompact) return undefined;
      const model = modelOf(ctx);
      const key = model?.provider && model?.id ? `${model.provider}/${model.id}` : undefined;
      const settings = typeof api.getSettings === "function" ? compactionSettings(safe(() => api.getSettings()), key) : undefined;
      const c = await runFabric("compute", {
        session: sessionFile,
        cwd: ctx.cwd,
        trusted: trusted(ctx),
        leafId: leaf,
        reason: "manual",
        customInstructions: claim?.customInstructions ?? undefined,
        settings,
        model,
      });
      if (c.action === "compaction") {
        engineError = undefined;
        draft = { intentId: claim?.intentId, summary: c.compaction.summary };
        const entries = Array.isArray(event?.entries) ? event.entries : [];
        return {
          entries: [
            ...entries,
            {
              type: "compaction",
              summary: c.compaction.summary,
              firstKeptEntryId: c.compaction.firstKeptEntryId ?? null,
              details: c.compaction.details,
            },
          ],
        };
      }
      if (claim) {
        if (c.action === "passthrough") await unclaim(ctx, claim.intentId); // Pi's own compactor: ctx.compact() at agent_settled
        else if (c.kind === "nothing" || c.kind === "compacted") await finish(ctx, { intentId: claim.intentId, error: "Nothing to compact" });
        else {
          if (c.notification) notify(ctx, c.notification, "error");
          await finish(ctx, { intentId: claim.intentId, error: `Compaction cancelled: ${c.reason}` });
        }
      }
      return undefined;
    } catch (err) {
      const message = `Fabric compaction failed: ${(err as Error).message}`;
      notify(ctx, message, "error");
      if (claim) await finish(ctx, { intentId: claim.intentId, error: message });
      return undefined;
    } finally {
      busy = false;
    }
  });

  pi.on("agent_settled", async (_event, ctx) => {
    ctxRef = ctx;
    promptAt = 0;
    piCompactingAt = 0;
    if (!sessionFile) {
      sessionFile = safe(() => ctx.sessionManager.getSessionFile());
      await hold(ctx);
    }
    if (draft) await recordDraft(ctx);
    kickLeaf();
    if (engine === "missing") {
      if (now() - missingSince >= RETRY_MS) await hold(ctx); // installed meanwhile?
      return;
    }
    if (pendingIntent() || thresholdDue(ctx)) await settle(ctx);
  });

  pi.on("model_select", async (_event, ctx) => {
    if (sessionFile && engine === "ok") await hold(ctx); // the configured threshold is per model
  });

  pi.on("session_tree", async () => {
    kickSoon(); // /tree navigation moves the live leaf without an append
  });

  pi.on("session_compact", async () => {
    piCompactingAt = 0;
    piFailure = undefined;
    render();
    kickSoon();
  });

  // Pi 1.x: a compaction that ended without an entry (a failure, a cancel). Shown in the
  // status line when it failed for a reason a user can act on.
  (pi.on as Json)("session_compact_failed", async (event: Json, ctx: ExtensionContext) => {
    piCompactingAt = 0;
    if (!event?.aborted && event?.errorMessage) {
      piFailure = clip(String(event.errorMessage), 160);
      render(ctx);
    }
  });

  pi.on("session_before_compact", async (event, ctx) => {
    const answer = await beforeCompact(event, ctx);
    if (answer?.cancel) piCompactingAt = 0; // it ends here; Pi's own compactor ends at session_compact
    return answer;
  });

  const beforeCompact = async (event: Json, ctx: ExtensionContext): Promise<Json> => {
    const ev = event as Json;
    const ours = bridgeCompaction;
    if (!ours) piCompactingAt = now();
    if (event.customInstructions === PI_VCC_SENTINEL) return undefined; // seed 002: pi-vcc decides
    const file = safe(() => ctx.sessionManager.getSessionFile()) ?? sessionFile;
    if (!file) return undefined; // an in-memory session has no file to compute from
    const automatic = event.reason === "threshold" || event.reason === "overflow";
    const backOff = () => {
      lastCancel = BACKED_OFF; // a prompt came in while the bridge's compaction was prepared
      return { cancel: true };
    };
    if (ours?.promptArrived) return backOff();
    try {
      const prep = event.preparation as Json;
      const r = await runFabric(
        "compute",
        {
          session: file,
          cwd: ctx.cwd,
          trusted: trusted(ctx),
          leafId: leafOf(ctx),
          reason: event.reason,
          customInstructions: event.customInstructions,
          tokensBefore: prep?.tokensBefore,
          settings: prep?.settings
            ? { reserveTokens: prep.settings.reserveTokens, keepRecentTokens: prep.settings.keepRecentTokens }
            : undefined,
          model: modelOf(ctx),
          piVccOverriding: ev._piVccOverriding ? true : undefined,
        },
        event.signal,
      );
      if (ours?.promptArrived) return backOff();
      if (engine !== "ok") {
        engine = "ok";
        engineMessage = undefined;
      }
      if (r.action === "compaction") {
        ev._fabricCompaction = true;
        engineError = undefined;
        render(ctx);
        return { compaction: r.compaction };
      }
      if (r.action === "passthrough") return undefined;
      const reason = String(r.reason ?? "");
      if (r.kind === "deferred") {
        render(ctx);
        return { cancel: true }; // seed 002: Pi's threshold compaction waits for the configured one
      }
      if (r.kind === "nothing" || r.kind === "compacted") {
        lastCancel = "Nothing to compact";
        return { cancel: true };
      }
      if (r.kind === "error" && automatic) {
        // the engine cannot produce this compaction: Pi's own compactor keeps the session going
        engineError = clip(reason, 160);
        render(ctx);
        notify(ctx, `Fabric compaction failed (${reason}): Pi's own compactor runs for this ${event.reason} compaction`, "warning");
        return undefined;
      }
      lastCancel = `Compaction cancelled: ${reason}`;
      if (r.notification) notify(ctx, r.notification, "error");
      return { cancel: true };
    } catch (err) {
      const message = `Fabric compaction failed: ${(err as Error).message}`;
      lastCancel = message;
      if (err instanceof EngineUnavailable && engine !== "ok") {
        // fabric-lsp cannot be run at all (it never held the session either)
        engine = "missing";
        engineMessage = clip((err as Error).message, 160);
        if (configuredEngine() === "pi") {
          render(ctx);
          return undefined; // compaction.engine: "pi": Pi's own compactor, as configured
        }
      } else {
        engineError = clip((err as Error).message, 160); // it runs, but this compaction failed
      }
      render(ctx);
      if (automatic) {
        // never cancelled for good: Pi's own compactor keeps the session going (overflow would be stuck)
        notify(ctx, `${message}: Pi's own compactor runs for this ${event.reason} compaction`, "warning");
        return undefined;
      }
      // fabric-lsp missing or failing: never Pi's LLM summary in place of the preview the user asked for
      notify(ctx, message, "error");
      return { cancel: true };
    }
  };

  pi.on("session_before_tree", async (event, ctx) => {
    const prep = event.preparation as Json;
    if (!prep?.userWantsSummary || prep.replaceInstructions === true) return undefined;
    const file = safe(() => ctx.sessionManager.getSessionFile()) ?? sessionFile;
    if (!file) return undefined;
    try {
      const r = await runFabric(
        "tree",
        {
          session: file,
          cwd: ctx.cwd,
          trusted: trusted(ctx),
          targetId: prep.targetId,
          oldLeafId: prep.oldLeafId ?? undefined,
          customInstructions: prep.customInstructions,
          replaceInstructions: prep.replaceInstructions === true,
          userWantsSummary: true,
        },
        event.signal,
      );
      if (r.action === "summary") return { summary: r.summary };
      if (r.action === "cancel") {
        if (r.notification) notify(ctx, r.notification, "error");
        return { cancel: true };
      }
      return undefined;
    } catch (err) {
      notify(ctx, `Fabric branch summary failed: ${(err as Error).message}`, "error");
      return { cancel: true };
    }
  });
}

function safe<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}
