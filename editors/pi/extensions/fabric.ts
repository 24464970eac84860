// fabric-lsp inside Pi: the live Pi commits the compactions an editor asks for, and every
// compaction Pi persists (manual /compact, threshold, overflow) is the deterministic
// Fabric summary that fabric-lsp's preview shows, byte for byte.
//
// Only `import type` from Pi and node built-ins: Pi loads this file as it is. The work is
// done by `fabric-lsp pi <action>` (one JSON object on stdin, one on stdout), found through
// $FABRIC_LSP_COMMAND (a command line), else ../fabric-lsp.json beside this file (written by
// `fabric-lsp pi install`), else `fabric-lsp` on PATH. See docs/pi.md.
//
// Nothing of the project Pi runs in is executed, whatever its trust: the program is an
// absolute path (a bare name is looked up in PATH's absolute directories only; a relative
// path is refused), a Python interpreter running `-m` gets `-I` (isolated: the current
// directory is not on sys.path), and every child runs in this extension's own directory,
// never in the project.
//
// Rules kept here: a handler never throws (a throwing session_before_compact makes Pi fall
// back to an LLM summary, so failures answer {cancel: true}); stdout is collected as bytes
// and decoded once (multi-byte characters split across chunks stay whole); the
// agent_settled handler awaits the compaction it starts (a prompt sent right after
// agent_settled is then persisted under the compaction).

import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { spawn } from "node:child_process";
import { accessSync, constants as fsConstants, existsSync, mkdtempSync, readFileSync, statSync, watch, type FSWatcher } from "node:fs";
import { tmpdir } from "node:os";
import { basename, delimiter, dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";

const PI_VCC_SENTINEL = "__pi_vcc__";
const POLL_MS = 1000;
const TIMEOUT_MS = 120_000;
const NOTIFY_MAX_BYTES = 512;

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

/** Run `fabric-lsp pi <action>` with `payload` on stdin; the parsed stdout object. */
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
      reject(new Error(`cannot start fabric-lsp: ${(err as Error).message}`));
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
      reject(new Error(`cannot start fabric-lsp (${argv[0]}, from ${from}): ${(err as Error).message}`));
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
      finish(() => reject(new Error(`cannot start fabric-lsp (${argv[0]}, from ${from}): ${why}`)));
    });
    child.on("close", (code: number | null) => {
      finish(() => {
        const text = Buffer.concat(out).toString("utf8"); // decoded once, never per chunk
        let value: Json;
        try {
          value = JSON.parse(text);
        } catch {
          const stderr = Buffer.concat(errs).toString("utf8").trim().split("\n").slice(-3).join(" ");
          reject(new Error(`fabric-lsp pi ${action} failed (exit ${code}): ${stderr || "no output"}`));
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

export default function fabric(pi: ExtensionAPI): void {
  const version = piVersion();
  let ctxRef: ExtensionContext | undefined;
  let sessionFile: string | undefined;
  let stateFile: string | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  let watcher: FSWatcher | undefined;
  let watchedDir: string | undefined;
  let busy = false;
  let lastPendingSeen: string | undefined;
  let lastStateMtime = -1;
  // why the last Fabric compute did not produce a compaction (for the intent's record)
  let lastCancel: string | undefined;
  const notified = new Set<string>();

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

  const base = (ctx: ExtensionContext): Json => ({
    session: sessionFile,
    pid: process.pid,
    piVersion: version,
    sessionId: safe(() => ctx.sessionManager.getSessionId()),
    leafId: safe(() => ctx.sessionManager.getLeafId()) ?? undefined,
    cwd: ctx.cwd,
    trusted: trusted(ctx),
  });

  const hold = async (ctx: ExtensionContext) => {
    if (!sessionFile) return;
    try {
      const r = await runFabric("hold", base(ctx));
      stateFile = r.stateFile;
      watchState();
    } catch (err) {
      notify(ctx, `fabric-lsp: cannot hold this session: ${(err as Error).message}`, "warning");
    }
  };

  const compactNow = (ctx: ExtensionContext, customInstructions: string | undefined): Promise<Json> =>
    new Promise((resolve) => {
      lastCancel = undefined;
      try {
        ctx.compact({
          customInstructions,
          onComplete: (result) => resolve({ result }),
          onError: (error) => resolve({ error }),
        });
      } catch (error) {
        resolve({ error });
      }
    });

  const commitClaim = async (ctx: ExtensionContext, claim: Json) => {
    const outcome = await compactNow(ctx, claim.customInstructions ?? undefined);
    const payload: Json = { ...base(ctx), intentId: claim.intentId };
    if (outcome.result) {
      const r = outcome.result;
      payload.committed = {
        entryId: safe(() => ctx.sessionManager.getLeafId()),
        summary: r.summary,
        tokensBefore: r.tokensBefore,
        estimatedTokensAfter: typeof r.estimatedTokensAfter === "number" ? r.estimatedTokensAfter : undefined,
      };
    } else {
      const message = (outcome.error as Error)?.message ?? String(outcome.error);
      payload.error = message === "Compaction cancelled" && lastCancel ? lastCancel : message;
    }
    try {
      await runFabric("finish", payload);
    } catch (err) {
      notify(ctx, `fabric-lsp: cannot record the compaction outcome: ${(err as Error).message}`, "error");
    }
    await hold(ctx); // the new leaf
  };

  // One settled boundary: refresh the lease, commit a pending intent, or compact at a
  // configured threshold below Pi's own. Serialized: one at a time.
  const settle = async (ctx: ExtensionContext) => {
    if (busy || !sessionFile) return;
    busy = true;
    try {
      const usage = safe(() => ctx.getContextUsage());
      const r = await runFabric("settled", { ...base(ctx), usage, model: modelOf(ctx) });
      stateFile = r.stateFile ?? stateFile;
      if (r.claim) {
        lastPendingSeen = r.claim.intentId;
        await commitClaim(ctx, r.claim);
      } else if (r.thresholdCompact) {
        await compactNow(ctx, undefined);
        await hold(ctx);
      }
    } catch (err) {
      notify(ctx, `fabric-lsp: ${(err as Error).message}`, "error");
    } finally {
      busy = false;
    }
  };

  // While Pi is idle, an intent requested from an editor is committed at once: the state
  // file's directory is watched (the file is replaced atomically, so the event names it),
  // and a once-a-second look covers file systems whose events do not arrive.
  const poll = () => {
    const ctx = ctxRef;
    if (!ctx || busy || !stateFile) return;
    try {
      if (!ctx.isIdle() || ctx.hasPendingMessages()) return;
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

  const start = async (ctx: ExtensionContext) => {
    ctxRef = ctx;
    sessionFile = safe(() => ctx.sessionManager.getSessionFile());
    lastPendingSeen = undefined;
    lastStateMtime = -1;
    await hold(ctx);
    if (!timer) {
      timer = setInterval(poll, POLL_MS);
      timer.unref?.();
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

  pi.on("session_start", async (_event, ctx) => {
    await start(ctx);
  });

  pi.on("session_shutdown", async (_event, ctx) => {
    if (timer) clearInterval(timer);
    timer = undefined;
    unwatch();
    const file = sessionFile;
    ctxRef = undefined;
    if (!file) return;
    try {
      await runFabric("release", { session: file, pid: process.pid, cwd: ctx.cwd });
    } catch {
      // a lease whose process is gone is ignored anyway
    }
  });

  pi.on("agent_settled", async (_event, ctx) => {
    ctxRef = ctx;
    if (!sessionFile) sessionFile = safe(() => ctx.sessionManager.getSessionFile());
    await settle(ctx);
  });

  pi.on("session_tree", async (_event, ctx) => {
    await hold(ctx); // /tree navigation moves the live leaf without an append
  });

  pi.on("session_compact", async (_event, ctx) => {
    if (!busy) await hold(ctx);
  });

  pi.on("session_before_compact", async (event, ctx) => {
    const ev = event as Json;
    if (event.customInstructions === PI_VCC_SENTINEL) return undefined; // seed 002: pi-vcc decides
    const file = safe(() => ctx.sessionManager.getSessionFile()) ?? sessionFile;
    if (!file) return undefined; // an in-memory session has no file to compute from
    try {
      const prep = event.preparation as Json;
      const r = await runFabric(
        "compute",
        {
          session: file,
          cwd: ctx.cwd,
          trusted: trusted(ctx),
          leafId: safe(() => ctx.sessionManager.getLeafId()) ?? undefined,
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
      if (r.action === "compaction") {
        ev._fabricCompaction = true;
        return { compaction: r.compaction };
      }
      if (r.action === "passthrough") return undefined;
      const reason = String(r.reason ?? "");
      lastCancel = /nothing to compact/i.test(reason) ? "Nothing to compact" : `Compaction cancelled: ${reason}`;
      if (r.notification) notify(ctx, r.notification, "error");
      return { cancel: true };
    } catch (err) {
      // fabric-lsp missing or failing: never Pi's LLM summary in place of the preview
      const message = `Fabric compaction failed: ${(err as Error).message}`;
      lastCancel = message;
      notify(ctx, message, "error");
      return { cancel: true };
    }
  });

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
