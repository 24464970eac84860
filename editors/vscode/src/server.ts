// Finding and starting the fabric-lsp server process, and feeding it configuration.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  LanguageClient, LanguageClientOptions, ServerOptions, CloseAction, ErrorAction,
} from 'vscode-languageclient/node';
import { PiDirs, piDirs, sessionPatterns } from './agentDir';
import { Installer, MIN_PYTHON, findPython, onPath, pythonExtensionInterpreter } from './bundled';

export const VIRTUAL_SCHEME = 'fabric';

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

/** The interpreter of the Python environment selected in the Python extension, or python.defaultInterpreterPath. */
async function selectedPython(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const fromExtension = await pythonExtensionInterpreter(resource);
  if (fromExtension) return fromExtension;
  const configured = vscode.workspace.getConfiguration('python', resource).get<string>('defaultInterpreterPath');
  return configured && configured !== 'python' ? configured : undefined;
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
  const cfg = vscode.workspace.getConfiguration('fabric', folder);
  const configured = cfg.get<string[]>('server.command') ?? [];
  const parts = configured.filter((p) => typeof p === 'string' && p.length > 0);
  if (parts.length > 0) {
    // Checked here so that a wrong path gives one message (ours), not the client's as well.
    const asPath = parts[0].includes('/') || parts[0].includes('\\');
    const resolved = asPath ? path.resolve(folder?.fsPath ?? process.cwd(), parts[0]) : undefined;
    const program = resolved ? (fs.existsSync(resolved) ? resolved : undefined) : onPath(parts[0]);
    if (!program) throw new NoServer(`Fabric: fabric.server.command names "${parts[0]}", which does not exist${parts[0].includes('/') ? '' : ' on PATH'}.`, 'not-found');
    return { command: program, args: parts.slice(1), source: 'setting fabric.server.command' };
  }
  const installer = opts.installer;
  if (!installer) {
    const own = installedFabricLsp(await selectedPython(folder));
    if (own) return own;
    throw new NoServer('fabric-lsp was not found (this build carries no server, and none is next to the selected Python or on PATH)', 'not-found');
  }
  const pythonSetting = cfg.get<string | null>('server.python') || undefined;
  const search = await findPython(folder, pythonSetting);
  for (const t of search.tried) opts.log.info(`python: ${t}`);
  if (!search.found) {
    const own = installedFabricLsp(await selectedPython(folder));
    if (own) {
      opts.log.warn(`no Python >= ${MIN_PYTHON.join('.')} for the bundled server; using the fabric-lsp found at ${own.command}`);
      return own;
    }
    const why = pythonSetting
      ? `fabric.server.python (${pythonSetting}) ${/: Python /.test(search.tried[0] ?? '') ? `is ${search.tried[0].split(': ').pop()}` : 'does not run'}`
      : `no Python ${MIN_PYTHON.join('.')} or newer was found (Python extension, PATH)`;
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
 * The `fabric` configuration section as the server should see it: only values the user
 * actually set (so <agentDir>/fabric.json and .pi/fabric.json still apply underneath),
 * plus `trusted` from workspace trust.
 */
export function serverSettings(keys: string[], scope?: vscode.Uri): Record<string, unknown> {
  const cfg = vscode.workspace.getConfiguration('fabric', scope);
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const i = cfg.inspect(key);
    const value = i?.workspaceFolderValue ?? i?.workspaceValue ?? i?.globalValue;
    if (value === undefined || value === null) continue;
    const path = key.split('.');
    let node = out;
    for (const part of path.slice(0, -1)) {
      if (typeof node[part] !== 'object' || node[part] === null) node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[path[path.length - 1]] = value;
  }
  out.trusted = vscode.workspace.isTrusted;
  return out;
}

/** Push the server-side settings (the server may also pull them on this notification). */
export async function notifyConfigurationChanged(client: LanguageClient, keys: string[]): Promise<void> {
  if (!client.isRunning()) return;
  const folder = vscode.workspace.workspaceFolders?.[0];
  await client.sendNotification('workspace/didChangeConfiguration', {
    settings: { fabric: serverSettings(keys, folder?.uri) },
  });
}

/** Pi's agent and session dirs as the server will resolve them (settings, fabric.server.env, env). */
export function currentPiDirs(): PiDirs {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const cfg = vscode.workspace.getConfiguration('fabric', folder);
  const extraEnv = cfg.get<Record<string, string>>('server.env') ?? {};
  return piDirs({
    agentDirSetting: cfg.get<string | null>('agentDir'),
    sessionDirSetting: cfg.get<string | null>('sessionDir'),
    env: { ...process.env, ...extraEnv },
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
  const extraEnv = vscode.workspace.getConfiguration('fabric').get<Record<string, string>>('server.env') ?? {};
  const folder = vscode.workspace.workspaceFolders?.[0];
  const selector = documentSelector(currentPiDirs());
  output.info(`syncing ${selector.map((s) => s.pattern ?? `${s.scheme}:`).join(', ')}`);
  const serverOptions: ServerOptions = {
    command: cmd.command,
    args: cmd.args,
    options: { env: { ...process.env, ...extraEnv }, cwd: folder?.uri.fsPath },
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
