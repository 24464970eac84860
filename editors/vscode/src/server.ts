// Finding and starting the fabric-lsp server process, and feeding it configuration.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  LanguageClient, LanguageClientOptions, ServerOptions, CloseAction, ErrorAction,
} from 'vscode-languageclient/node';

export const VIRTUAL_SCHEME = 'fabric';

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

/** The interpreter of the Python environment selected in the Python extension, if any. */
async function selectedPython(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (ext) {
    try {
      const api = (ext.isActive ? ext.exports : await ext.activate()) as any;
      const envPath = api?.environments?.getActiveEnvironmentPath?.(resource);
      if (envPath) {
        const resolved = await api.environments.resolveEnvironment?.(envPath);
        const exe = resolved?.executable?.uri?.fsPath ?? envPath.path;
        if (typeof exe === 'string' && exe) return exe;
      }
    } catch {
      // The Python extension is optional; fall through to the settings and PATH.
    }
  }
  const configured = vscode.workspace.getConfiguration('python', resource).get<string>('defaultInterpreterPath');
  return configured && configured !== 'python' ? configured : undefined;
}

export async function resolveServerCommand(): Promise<ServerCommand> {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const configured = vscode.workspace.getConfiguration('fabric', folder).get<string[]>('server.command') ?? [];
  const parts = configured.filter((p) => typeof p === 'string' && p.length > 0);
  if (parts.length > 0) return { command: parts[0], args: parts.slice(1), source: 'setting fabric.server.command' };
  const fromPython = fabricNextTo(await selectedPython(folder));
  if (fromPython) return { command: fromPython, args: [], source: 'selected Python environment' };
  return { command: 'fabric-lsp', args: [], source: 'PATH' };
}

const CLIENT_ONLY = ['server.', 'trace.', 'recall.'];

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

export function createClient(
  cmd: ServerCommand,
  keys: string[],
  output: vscode.LogOutputChannel,
): LanguageClient {
  const extraEnv = vscode.workspace.getConfiguration('fabric').get<Record<string, string>>('server.env') ?? {};
  const folder = vscode.workspace.workspaceFolders?.[0];
  const serverOptions: ServerOptions = {
    command: cmd.command,
    args: cmd.args,
    options: { env: { ...process.env, ...extraEnv }, cwd: folder?.uri.fsPath },
  };
  const clientOptions: LanguageClientOptions = {
    // Session files get JSONL hovers; every other text document can hold entry references.
    documentSelector: [
      { scheme: 'file' },
      { scheme: 'untitled' },
      { scheme: VIRTUAL_SCHEME },
    ],
    outputChannel: output,
    initializationOptions: () => serverSettings(keys, folder?.uri),
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      closed: () => ({ action: CloseAction.DoNotRestart, message: 'The fabric-lsp server stopped. Run "Fabric: Restart Server" to start it again.' }),
    },
    middleware: {
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
