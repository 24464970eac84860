// The extension's state: one language client (recreated on restart), the status bar and
// a request helper that every command goes through.
import * as vscode from 'vscode';
import { ACTION_LABELS, type DomainError, errorLine, explainError } from './errors';
import { LanguageClient, ResponseError, State, WorkDoneProgress } from 'vscode-languageclient/node';
import type { WorkDoneProgressBegin, WorkDoneProgressReport, WorkDoneProgressEnd } from 'vscode-languageclient/node';
import {
  NoServer, createClient, notifyConfigurationChanged, resolveServerCommand, serverFingerprint, serverSettingKeys,
  setRestrictedSettings,
} from './server';
import { setSpawnDir } from './spawnDir';
import { type ActivityEvent, indexStatus } from './protocol';
import { teamConfigured } from './scopes';
import { VirtualDocuments } from './documents';
import { Installer, readBundle } from './bundled';

export class ServerUnavailable extends Error {}

export class Fabric implements vscode.Disposable {
  client: LanguageClient | undefined;
  readonly keys: string[];
  readonly status: vscode.StatusBarItem;
  private starting: Promise<void> | undefined;
  /** Why the last start failed (already told once); cleared by a restart. */
  private failure: string | undefined;
  /** The bundled server's installer (undefined in a development build without server/). */
  readonly installer: Installer | undefined;
  private readonly clientListeners: vscode.Disposable[] = [];
  private readonly startListeners: ((client: LanguageClient) => void)[] = [];
  /** serverFingerprint() and workspace trust at the running server's start. */
  private fingerprint: string | undefined;
  private startedTrusted = false;
  private readyTooltip = 'fabric-lsp';

  constructor(
    readonly context: vscode.ExtensionContext,
    readonly output: vscode.LogOutputChannel,
    readonly docs: VirtualDocuments,
  ) {
    this.keys = serverSettingKeys(context.extension.packageJSON);
    setRestrictedSettings(context.extension.packageJSON);
    // Every process we start runs here, never in the project (spawnDir.ts).
    setSpawnDir(context.globalStorageUri.fsPath);
    this.status = vscode.window.createStatusBarItem('fabric.server', vscode.StatusBarAlignment.Left, 10);
    this.status.name = 'Fabric server';
    this.status.command = 'fabricLsp.showLog';
    const bundle = readBundle(context.extensionPath);
    this.installer = bundle ? new Installer(bundle, context.globalStorageUri.fsPath, output) : undefined;
    context.subscriptions.push(
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (!e.affectsConfiguration('fabric')) return;
        // A restart reads the settings anew; anything that lands meanwhile is looked at after it.
        if (this.restarting) { this.recheck = true; return; }
        this.configurationChanged(e.affectsConfiguration('fabric.server'));
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        if (this.restarting) { this.recheck = true; return; }
        if (!this.client) return;
        // The workspace's own server command, environment or Pi dirs apply now: a new
        // server (which gets every setting at start); else the settings, with trusted: true.
        if (serverFingerprint() !== this.fingerprint) this.restartForTrust();
        else void notifyConfigurationChanged(this.client, this.keys);
      }),
    );
  }

  private configurationChanged(serverChanged: boolean): void {
    // VS Code reloads the workspace's settings when trust is granted, and may tell the
    // extension host before or after onDidGrantWorkspaceTrust: either path restarts.
    if (this.trustGrantedSinceStart() && serverFingerprint() !== this.fingerprint) {
      this.restartForTrust();
      return;
    }
    if (serverChanged) {
      if (this.selecting) return; // Select Server… restarts by itself
      // A value that does not apply (a workspace value in Restricted Mode) changes nothing.
      if (this.client && serverFingerprint() === this.fingerprint) return;
      void vscode.window.showInformationMessage(
        'Fabric: the server command or environment changed.', 'Restart Server',
      ).then((choice) => { if (choice) void this.restart(); });
    } else if (this.client) {
      void notifyConfigurationChanged(this.client, this.keys);
    }
  }

  /** The running server was started in Restricted Mode and the workspace is trusted now. */
  private trustGrantedSinceStart(): boolean {
    return this.client !== undefined && !this.startedTrusted && vscode.workspace.isTrusted;
  }

  private restartForTrust(): void {
    this.output.info('workspace trusted: its own server settings apply now; restarting the server');
    this.startedTrusted = true; // one restart, whichever event comes first
    void this.restart();
  }

  /** Called with every client that finished starting (also after a restart). */
  onDidStart(listener: (client: LanguageClient) => void): void {
    this.startListeners.push(listener);
  }

  /** The background indexer's news (`fabric/activity`) on the ready status item: "indexing
   * 3/12 sessions" with a spinner while a pass runs, "12 sessions indexed" once the whole
   * history is (so even a small history shows that it was indexed). */
  showIndex(e: ActivityEvent): void {
    const status = indexStatus(e);
    if (!status || !this.client || this.restarting || this.status.text.includes('$(error)')) return;
    this.setStatus(`${status.busy ? '$(sync~spin)' : '$(check)'} Fabric: ready · ${status.words}`, `${this.readyTooltip}\n${status.detail}`);
  }

  private setStatus(text: string, tooltip: string): void {
    this.status.text = text;
    this.status.tooltip = tooltip;
  }

  /** Whether a server start was attempted (the extension stays dormant without a Pi agent dir). */
  get started(): boolean {
    return this.client !== undefined || this.starting !== undefined || this.failure !== undefined;
  }

  start(): Promise<void> {
    if (!this.starting) {
      this.failure = undefined;
      this.starting = this.doStart().finally(() => { this.starting = undefined; });
    }
    return this.starting;
  }

  private async doStart(): Promise<void> {
    this.setStatus('$(loading~spin) Fabric: starting', 'Starting fabric-lsp');
    this.status.show();
    let cmd;
    this.fingerprint = serverFingerprint();
    this.startedTrusted = vscode.workspace.isTrusted;
    try {
      cmd = await resolveServerCommand({ installer: this.installer, log: this.output });
    } catch (err) {
      this.fail(err);
      return;
    }
    this.output.info(`starting ${[cmd.command, ...cmd.args].join(' ')} (from ${cmd.source}); trusted=${vscode.workspace.isTrusted}`);
    this.setStatus('$(loading~spin) Fabric: starting', `Starting ${cmd.command}`);
    const client = createClient(cmd, this.keys, this.output);
    this.client = client;
    let running = false;
    this.clientListeners.push(client.onDidChangeState((e) => {
      if (e.newState === State.Running) running = true;
      if (e.newState === State.Stopped && this.client === client) {
        this.setStatus('$(error) Fabric: stopped', 'The fabric-lsp server is not running. Click for the log.');
        // A server that ran and then died: one message (the client's own is suppressed).
        if (running && !this.stopping) {
          void vscode.window.showErrorMessage('Fabric: the fabric-lsp server stopped.', 'Restart Server', 'Show Log')
            .then((choice) => {
              if (choice === 'Restart Server') void this.restart();
              if (choice === 'Show Log') this.output.show();
            });
        }
      }
    }));
    try {
      await client.start();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.output.error(`could not start the server: ${message}`);
      this.client = undefined;
      await client.dispose().catch(() => undefined);
      this.fail(new NoServer(`Fabric: could not start the server "${cmd.command}" (${message}).`, 'not-found'));
      return;
    }
    const info = client.initializeResult?.serverInfo;
    this.readyTooltip = `${info?.name ?? 'fabric-lsp'} ${info?.version ?? ''} via ${cmd.source}`.trim();
    this.setStatus('$(check) Fabric: ready', this.readyTooltip);
    for (const listener of this.startListeners) listener(client);
  }

  /** The one message for a server that cannot start, with what to do about it. */
  private fail(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    this.failure = message;
    const noPython = err instanceof NoServer && err.reason === 'no-python';
    if (err instanceof NoServer) for (const t of err.tried) this.output.info(`tried ${t}`);
    this.output.error(message);
    this.setStatus(noPython ? '$(error) Fabric: no Python' : '$(error) Fabric: not running', `${message} Click for the log.`);
    const actions = noPython ? ['Select Server…', 'Show Log'] : ['Select Server…', 'Show Log', 'Open Settings'];
    void vscode.window.showErrorMessage(message, ...actions).then((choice) => {
      if (choice === 'Select Server…') void vscode.commands.executeCommand('fabricLsp.selectServer');
      if (choice === 'Show Log') this.output.show();
      if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'fabric.server');
    });
  }

  private stopping = false;
  /** Set while Select Server… writes settings (it restarts by itself). */
  selecting = false;

  /** Set while restart() runs; `recheck` when settings or trust changed meanwhile. */
  private restarting = false;
  private recheck = false;

  async restart(): Promise<void> {
    if (this.restarting) return;
    this.restarting = true;
    try {
      await this.stopClient();
      await this.start();
    } finally {
      this.restarting = false;
    }
    if (this.recheck) {
      this.recheck = false;
      if (this.client) this.configurationChanged(serverFingerprint() !== this.fingerprint);
    }
  }

  /** Stop the running server, if any (restart, reinstall). */
  async stopClient(): Promise<void> {
    const old = this.client;
    this.client = undefined;
    for (const d of this.clientListeners.splice(0)) d.dispose();
    if (old) {
      this.setStatus('$(loading~spin) Fabric: restarting', 'Restarting fabric-lsp');
      this.stopping = true;
      try {
        await old.stop(5000);
      } catch (err) {
        this.output.warn(`stopping the old server: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        this.stopping = false;
      }
      await old.dispose().catch(() => undefined);
    }
  }

  /** Send a custom request; errors become readable messages ("… not available yet"). */
  async request<R>(method: string, params: unknown, token?: vscode.CancellationToken): Promise<R> {
    // Dormant (no Pi agent dir at activation): the first Fabric request starts the server.
    if (!this.started) await this.start();
    if (this.starting) await this.starting;
    const client = this.client;
    if (!client || !client.isRunning()) {
      throw new ServerUnavailable(this.failure
        ? `the fabric-lsp server is not running: ${this.failure}`
        : 'the fabric-lsp server is not running (see "Fabric: Show Log", or run "Fabric: Restart Server")');
    }
    const t0 = Date.now();
    try {
      // Pass the token only when there is one: vscode-jsonrpc treats a trailing
      // `undefined` as a second parameter and would send the params as an array.
      const result = token
        ? await client.sendRequest<R>(method, params, token)
        : await client.sendRequest<R>(method, params);
      // What was asked and how it went, so the log tells what happened after "ready".
      this.output.info(`${method}: ${requestSummary(params, result)} in ${Date.now() - t0} ms`);
      return result;
    } catch (err) {
      this.output.info(`${method}: ${token?.isCancellationRequested ? 'cancelled' : `failed: ${errorMessage(err)}`} after ${Date.now() - t0} ms`);
      if (err instanceof ResponseError && err.code === -32601) {
        throw new Error(`${method} is not available in this server (${err.message})`);
      }
      throw err;
    }
  }

  /**
   * Follow `$/progress` for a token this client chose (sent as the request's
   * `workDoneToken`; the server then creates none of its own).
   */
  onProgress(
    token: string,
    handler: (value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd) => void,
  ): vscode.Disposable {
    const client = this.client;
    if (!client || !client.isRunning()) return new vscode.Disposable(() => undefined);
    return client.onProgress(WorkDoneProgress.type, token, handler);
  }

  async dispose(): Promise<void> {
    for (const d of this.clientListeners.splice(0)) d.dispose();
    this.status.dispose();
    const client = this.client;
    this.client = undefined;
    this.stopping = true;
    if (client) await client.stop(2000).catch(() => undefined);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof ResponseError) return `${err.message} (code ${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

/** Whether the user set a team database (`fabric.team.url`; scopes.ts). */
export function teamOn(): boolean {
  return teamConfigured(vscode.workspace.getConfiguration('fabric').get('team.url'));
}

/**
 * A domain error as one message that says what is wrong and what to do, with its action as
 * a button; the code goes to the log. `what`: the operation, for the log line.
 */
export async function showDomainError(fabric: Fabric, what: string, error: DomainError): Promise<void> {
  fabric.output.info(`${what}: ${error.code}: ${error.message}`);
  const e = explainError(error);
  const buttons = e.action === 'setAgentDir' || e.action === 'pickSession' || e.action === 'teamSettings' ? [ACTION_LABELS[e.action]] : [];
  const chosen = await vscode.window.showErrorMessage(`Fabric: ${errorLine(e)}`, ...buttons);
  if (chosen === undefined) return;
  if (e.action === 'setAgentDir') await vscode.commands.executeCommand('workbench.action.openSettings', 'fabric.agentDir');
  else if (e.action === 'pickSession') await vscode.commands.executeCommand('fabricLsp.sessions');
  else if (e.action === 'teamSettings') await vscode.commands.executeCommand('workbench.action.openSettings', 'fabric.team');
}

/** One log line about a request: its subject and its outcome (never a result's text). */
export function requestSummary(params: unknown, result: unknown): string {
  const p = (params ?? {}) as Record<string, unknown>;
  const r = (result ?? {}) as Record<string, unknown>;
  const subject = typeof p.query === 'string' ? `“${p.query}”${p.scope ? ` (${String(p.scope)})` : ''}`
    : typeof p.session === 'string' ? p.session : typeof p.path === 'string' ? p.path : '';
  const error = (r.error as { code?: string } | undefined)?.code ?? (r.coverage as { error?: { code?: string } } | undefined)?.error?.code;
  const outcome = error ? `error ${error}`
    : typeof r.totalMatches === 'number' ? `${r.totalMatches} matches`
    : typeof r.outcome === 'string' ? r.outcome
    : Array.isArray(r.sessions) ? `${r.sessions.length} sessions`
    : Array.isArray(r.items) ? `${r.items.length} items`
    : Array.isArray(r.expanded) ? `${r.expanded.length} entries`
    : 'done';
  return subject ? `${subject} → ${outcome}` : outcome;
}
