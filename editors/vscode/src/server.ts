// Finding and starting the fabric-lsp server process, and feeding it configuration.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { withOpenLink } from './hoverLink';
import {
  LanguageClient, LanguageClientOptions, ServerOptions, CloseAction, ErrorAction,
} from 'vscode-languageclient/node';
import { PiDirs, piDirs, sessionPatterns } from './agentDir';
import { Installer, MIN_PYTHON, findPython, onPath, pythonExtensionInterpreter } from './bundled';
import { expandHome, programKind, spawnDir } from './spawnDir';
import { Inspect, pickServerSettings, restrictedSettings, settingValue } from './trust';

export const VIRTUAL_SCHEME = 'fabric';

/**
 * Settings an untrusted workspace may not choose: the manifest's restrictedConfigurations
 * (ids without `fabric.`), set at activation from this extension's own package.json.
 */
let restricted: ReadonlySet<string> = new Set();

export function setRestrictedSettings(packageJSON: any): ReadonlySet<string> {
  restricted = restrictedSettings(packageJSON);
  return restricted;
}

function inspector(scope?: vscode.Uri): Inspect {
  const cfg = vscode.workspace.getConfiguration('fabric', scope);
  return (key) => cfg.inspect(key);
}

/**
 * One `fabric.*` setting as this extension uses it: the most specific value set, except
 * that in an untrusted workspace a restricted setting has only the user's value; else
 * the default.
 */
export function fabricSetting<T>(key: string, scope?: vscode.Uri): T | undefined {
  const i = vscode.workspace.getConfiguration('fabric', scope).inspect<T>(key);
  return settingValue(i, vscode.workspace.isTrusted, restricted.has(key)) ?? i?.defaultValue;
}

/** The settings whose workspace values are not used while the workspace is untrusted (`fabric.…` ids). */
export function restrictedSettingIds(): string[] {
  return [...restricted].sort().map((key) => `fabric.${key}`);
}

/**
 * What decides the server process and which session files the client syncs: its command,
 * interpreter, environment and Pi's directories as they apply now.
 */
export function serverFingerprint(): string {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  return JSON.stringify(['server.command', 'server.python', 'server.env', 'agentDir', 'sessionDir']
    .map((key) => fabricSetting(key, folder) ?? null));
}

/** Results of server commands the extension shows (the client registers `fabric.*` itself). */
export const commandResults: { fileHistory?: (result: any) => Promise<void> } = {};

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the command came from, for the log. */
  source: string;
}

function exeName(name: string): string {
  return process.platform === 'win32' ? `${name}.exe` : name;
}

function fabricNextTo(interpreter: string | undefined): string | undefined {
  if (!interpreter) return undefined;
  let dir = interpreter;
  try {
    if (fs.statSync(interpreter).isFile()) dir = path.dirname(interpreter);
    else dir = path.join(interpreter, process.platform === 'win32' ? 'Scripts' : 'bin');
  } catch {
    return undefined;
  }
  const candidate = path.join(dir, exeName('fabric-lsp'));
  return fs.existsSync(candidate) ? candidate : undefined;
}

/**
 * The interpreter of the Python environment selected in the Python extension, or
 * python.defaultInterpreterPath. In an untrusted workspace only the user's own
 * python.defaultInterpreterPath counts (the workspace could name its own interpreter).
 */
async function selectedPython(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const trusted = vscode.workspace.isTrusted;
  const fromExtension = trusted ? await pythonExtensionInterpreter(resource) : undefined;
  if (fromExtension) return fromExtension;
  const i = vscode.workspace.getConfiguration('python', resource).inspect<string>('defaultInterpreterPath');
  const configured = settingValue(i, trusted, true);
  if (!configured || configured === 'python') return undefined;
  const expanded = expandHome(configured);
  return path.isAbsolute(expanded) ? expanded : undefined;
}

/** No server can be started; `message` says why in one sentence, `tried` lists the candidates. */
export class NoServer extends Error {
  constructor(message: string, readonly reason: 'no-python' | 'install-failed' | 'not-found', readonly tried: string[] = []) {
    super(message);
  }
}

/** A fabric-lsp the user installed: next to the selected Python, else on PATH. */
function installedFabricLsp(selected: string | undefined): ServerCommand | undefined {
  const fromPython = fabricNextTo(selected);
  if (fromPython) return { command: fromPython, args: [], source: 'selected Python environment' };
  const fromPath = onPath('fabric-lsp');
  return fromPath ? { command: fromPath, args: [], source: 'PATH' } : undefined;
}

export interface ResolveOptions {
  /** The bundled server's installer; undefined in a build without server/ (development). */
  installer?: Installer;
  log: vscode.LogOutputChannel;
}

/**
 * The command that starts the server: `fabric.server.command` (a fabric-lsp the user
 * installed), else the bundled server installed with a Python >= 3.11 (the first use
 * installs it, with a progress notification), else a fabric-lsp next to the selected
 * Python or on PATH. Throws NoServer when none is usable; every returned command exists.
 */
export async function resolveServerCommand(opts: ResolveOptions): Promise<ServerCommand> {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const configured = fabricSetting<string[]>('server.command', folder) ?? [];
  const parts = Array.isArray(configured) ? configured.filter((p) => typeof p === 'string' && p.length > 0) : [];
  if (parts.length > 0) {
    // Checked here so that a wrong path gives one message (ours), not the client's as well.
    // Absolute (or ~/…), or a name on PATH: never relative to the project.
    const kind = programKind(parts[0]);
    if (kind === 'relative') {
      throw new NoServer(`Fabric: fabric.server.command names "${parts[0]}", a relative path: give the absolute path of fabric-lsp (or ~/…), or a name on PATH.`, 'not-found');
    }
    const absolute = kind === 'absolute' ? path.resolve(expandHome(parts[0])) : undefined;
    const program = absolute ? (fs.existsSync(absolute) ? absolute : undefined) : onPath(parts[0]);
    if (!program) throw new NoServer(`Fabric: fabric.server.command names "${parts[0]}", which does not exist${absolute ? '' : ' on PATH'}.`, 'not-found');
    return { command: program, args: parts.slice(1), source: 'setting fabric.server.command' };
  }
  const installer = opts.installer;
  if (!installer) {
    const own = installedFabricLsp(await selectedPython(folder));
    if (own) return own;
    throw new NoServer('fabric-lsp was not found (this build carries no server, and none is next to the selected Python or on PATH)', 'not-found');
  }
  const pythonSetting = fabricSetting<string | null>('server.python', folder) || undefined;
  const search = await findPython(folder, pythonSetting, vscode.workspace.isTrusted);
  for (const t of search.tried) opts.log.info(`python: ${t}`);
  if (!search.found) {
    const own = installedFabricLsp(await selectedPython(folder));
    if (own) {
      opts.log.warn(`no Python >= ${MIN_PYTHON.join('.')} for the bundled server; using the fabric-lsp found at ${own.command}`);
      return own;
    }
    const first = search.tried[0] ?? '';
    const why = pythonSetting
      ? (/: Python /.test(first) ? `fabric.server.python (${pythonSetting}) is ${first.split(': ').pop()}`
        : /relative path|not found on PATH/.test(first) ? first : `fabric.server.python (${pythonSetting}) does not run`)
      : search.summary ?? `no Python ${MIN_PYTHON.join('.')} or newer was found (Python extension, PATH)`;
    throw new NoServer(`Fabric needs Python ${MIN_PYTHON.join('.')}+ to run its bundled server: ${why}.`, 'no-python', search.tried);
  }
  const python = search.found;
  let installed = installer.installed(python);
  if (!installed) {
    try {
      installed = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'Fabric: installing the bundled server' },
        (progress) => installer.ensure(python, (message) => progress.report({ message })),
      );
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      opts.log.error(`installing the bundled server: ${message}`);
      const own = installedFabricLsp(await selectedPython(folder));
      if (own) return own;
      throw new NoServer(`Fabric could not install its bundled server: ${message}`, 'install-failed');
    }
  }
  return {
    command: installed.fabricLsp,
    args: [],
    source: `bundled server, Python ${installed.pythonVersion} (${python.source}), dependencies from ${installed.from === 'index' ? 'the package index' : 'the bundled wheelhouse'}`,
  };
}

const CLIENT_ONLY = ['server.', 'trace.', 'recall.', 'preview.'];

/** Server-side setting keys, read from this extension's own package.json contributions. */
export function serverSettingKeys(packageJSON: any): string[] {
  const props = packageJSON?.contributes?.configuration?.properties ?? {};
  return Object.keys(props)
    .filter((k) => k.startsWith('fabric.'))
    .map((k) => k.slice('fabric.'.length))
    .filter((k) => !CLIENT_ONLY.some((p) => k.startsWith(p)))
    .sort();
}

/**
 * The `fabric` configuration section as the server should see it (trust.ts
 * pickServerSettings): values the user set; in an untrusted workspace no workspace value
 * of a restricted setting (agentDir, sessionDir, indexDir, …); `trusted` from VS Code.
 */
export function serverSettings(keys: string[], scope?: vscode.Uri): Record<string, unknown> {
  return pickServerSettings(keys, inspector(scope), vscode.workspace.isTrusted, restricted);
}

/** Push the server-side settings (the server may also pull them on this notification). */
export async function notifyConfigurationChanged(client: LanguageClient, keys: string[]): Promise<void> {
  if (!client.isRunning()) return;
  const folder = vscode.workspace.workspaceFolders?.[0];
  try {
    await client.sendNotification('workspace/didChangeConfiguration', {
      settings: { fabric: serverSettings(keys, folder?.uri) },
    });
  } catch (err) {
    // A server being stopped meanwhile (a restart) needs no settings: its successor reads them.
    if (client.isRunning()) throw err;
  }
}

/** fabric.server.env as it applies (string values only). */
function serverEnv(folder: vscode.Uri | undefined): Record<string, string> {
  const value = fabricSetting<Record<string, unknown>>('server.env', folder) ?? {};
  const out: Record<string, string> = {};
  if (typeof value !== 'object' || value === null) return out;
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** Pi's agent and session dirs as the server will resolve them (settings, fabric.server.env, env). */
export function currentPiDirs(): PiDirs {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  return piDirs({
    agentDirSetting: fabricSetting<string | null>('agentDir', folder),
    sessionDirSetting: fabricSetting<string | null>('sessionDir', folder),
    env: { ...process.env, ...serverEnv(folder) },
  });
}

/**
 * What the client syncs to the server: the session JSONL files under the session dirs and
 * the extension's own `fabric:` documents. Nothing else is sent (other files get hovers and
 * lenses on demand, see bridge.ts).
 */
export function documentSelector(dirs: PiDirs): { scheme: string; pattern?: string }[] {
  return [
    ...sessionPatterns(dirs).map((pattern) => ({ scheme: 'file', pattern })),
    { scheme: VIRTUAL_SCHEME },
  ];
}

export function createClient(
  cmd: ServerCommand,
  keys: string[],
  output: vscode.LogOutputChannel,
): LanguageClient {
  const folder = vscode.workspace.workspaceFolders?.[0];
  const extraEnv = serverEnv(folder?.uri);
  const selector = documentSelector(currentPiDirs());
  output.info(`syncing ${selector.map((s) => s.pattern ?? `${s.scheme}:`).join(', ')}`);
  const cwd = spawnDir();
  output.info(`server working directory: ${cwd}`);
  const serverOptions: ServerOptions = {
    command: cmd.command,
    args: cmd.args,
    // Never the project: the server must not pick up anything from the current directory.
    options: { env: { ...process.env, ...extraEnv }, cwd },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: selector,
    outputChannel: output,
    initializationOptions: () => serverSettings(keys, folder?.uri),
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      // Handled: the extension shows one message itself (fabric.ts), not the client's too.
      closed: () => ({ action: CloseAction.DoNotRestart, handled: true }),
    },
    initializationFailedHandler: () => false,
    middleware: {
      // A hover on an entry gets a link that opens it.
      provideHover: async (doc, pos, token, next) => withOpenLink(await next(doc, pos, token), doc, pos),
      // The file-history CodeLens runs `fabric.fileHistory`: show what it answers.
      executeCommand: async (command, args, next) => {
        const result = await next(command, args);
        if (command === 'fabric.fileHistory' && result && commandResults.fileHistory) {
          await commandResults.fileHistory(result);
        }
        return result;
      },
      workspace: {
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) return answers;
          return params.items.map((item, i) => {
            if (item.section === 'fabric') {
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : folder?.uri;
              return serverSettings(keys, scope);
            }
            return answers[i];
          });
        },
      },
    },
  };
  return new LanguageClient('fabric', 'Fabric', serverOptions, clientOptions);
}

/**
 * `fabric/compactionPreview` overrides from `fabric.preview.*` (unset: the server uses
 * Pi's own settings). The window and the target ratio are server settings
 * (`fabric.compaction.contextWindow`, `fabric.compaction.targetContextRatio`).
 */
export function previewOverrides(scope?: vscode.Uri): { keepRecentTokens?: number; reserveTokens?: number } {
  const cfg = vscode.workspace.getConfiguration('fabric.preview', scope);
  const out: { keepRecentTokens?: number; reserveTokens?: number } = {};
  for (const key of ['keepRecentTokens', 'reserveTokens'] as const) {
    const v = cfg.get<number | null>(key);
    if (typeof v === 'number' && Number.isInteger(v) && v >= 0) out[key] = v;
  }
  return out;
}
