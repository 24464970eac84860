// The extension's state: one language client (recreated on restart), the status bar and
// a request helper that every command goes through.
import * as vscode from 'vscode';
import { LanguageClient, ResponseError, State, WorkDoneProgress } from 'vscode-languageclient/node';
import type { WorkDoneProgressBegin, WorkDoneProgressReport, WorkDoneProgressEnd } from 'vscode-languageclient/node';
import {
  createClient, notifyConfigurationChanged, resolveServerCommand, serverSettingKeys,
} from './server';
import { VirtualDocuments } from './documents';

export class ServerUnavailable extends Error {}

export class Fabric implements vscode.Disposable {
  client: LanguageClient | undefined;
  readonly keys: string[];
  readonly status: vscode.StatusBarItem;
  private starting: Promise<void> | undefined;
  private readonly clientListeners: vscode.Disposable[] = [];
  private readonly startListeners: ((client: LanguageClient) => void)[] = [];

  constructor(
    readonly context: vscode.ExtensionContext,
    readonly output: vscode.LogOutputChannel,
    readonly docs: VirtualDocuments,
  ) {
    this.keys = serverSettingKeys(context.extension.packageJSON);
    this.status = vscode.window.createStatusBarItem('fabric.server', vscode.StatusBarAlignment.Left, 10);
    this.status.name = 'Fabric server';
    this.status.command = 'fabricLsp.showLog';
    this.setStatus('$(loading~spin) Fabric: starting', 'Starting fabric-lsp');
    this.status.show();
    context.subscriptions.push(
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('fabric.server')) {
          void vscode.window.showInformationMessage(
            'Fabric: the server command or environment changed.', 'Restart Server',
          ).then((choice) => { if (choice) void this.restart(); });
        } else if (e.affectsConfiguration('fabric') && this.client) {
          void notifyConfigurationChanged(this.client, this.keys);
        }
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        if (this.client) void notifyConfigurationChanged(this.client, this.keys);
      }),
    );
  }

  /** Called with every client that finished starting (also after a restart). */
  onDidStart(listener: (client: LanguageClient) => void): void {
    this.startListeners.push(listener);
  }

  private setStatus(text: string, tooltip: string): void {
    this.status.text = text;
    this.status.tooltip = tooltip;
  }

  start(): Promise<void> {
    if (!this.starting) {
      this.starting = this.doStart().finally(() => { this.starting = undefined; });
    }
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const cmd = await resolveServerCommand();
    this.output.info(`starting ${[cmd.command, ...cmd.args].join(' ')} (from ${cmd.source}); trusted=${vscode.workspace.isTrusted}`);
    this.setStatus('$(loading~spin) Fabric: starting', `Starting ${cmd.command}`);
    const client = createClient(cmd, this.keys, this.output);
    this.client = client;
    this.clientListeners.push(client.onDidChangeState((e) => {
      if (e.newState === State.Stopped && this.client === client) {
        this.setStatus('$(error) Fabric: stopped', 'The fabric-lsp server is not running. Click for the log.');
      }
    }));
    try {
      await client.start();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.output.error(`could not start the server: ${message}`);
      this.setStatus('$(error) Fabric: not running', `Could not start ${cmd.command}: ${message}`);
      const choice = await vscode.window.showErrorMessage(
        `Fabric: could not start the server "${cmd.command}" (${message}). Set fabric.server.command or install fabric-lsp.`,
        'Open Settings', 'Show Log',
      );
      if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'fabric.server.command');
      if (choice === 'Show Log') this.output.show();
      return;
    }
    const info = client.initializeResult?.serverInfo;
    this.setStatus('$(check) Fabric: ready', `${info?.name ?? 'fabric-lsp'} ${info?.version ?? ''} via ${cmd.source}`.trim());
    for (const listener of this.startListeners) listener(client);
  }

  async restart(): Promise<void> {
    const old = this.client;
    this.client = undefined;
    for (const d of this.clientListeners.splice(0)) d.dispose();
    if (old) {
      this.setStatus('$(loading~spin) Fabric: restarting', 'Restarting fabric-lsp');
      try {
        await old.stop(5000);
      } catch (err) {
        this.output.warn(`stopping the old server: ${err instanceof Error ? err.message : String(err)}`);
      }
      await old.dispose().catch(() => undefined);
    }
    await this.start();
  }

  /** Send a custom request; errors become readable messages ("… not available yet"). */
  async request<R>(method: string, params: unknown, token?: vscode.CancellationToken): Promise<R> {
    if (this.starting) await this.starting;
    const client = this.client;
    if (!client || !client.isRunning()) {
      throw new ServerUnavailable('the fabric-lsp server is not running (see "Fabric: Show Log", or run "Fabric: Restart Server")');
    }
    try {
      // Pass the token only when there is one: vscode-jsonrpc treats a trailing
      // `undefined` as a second parameter and would send the params as an array.
      return token
        ? await client.sendRequest<R>(method, params, token)
        : await client.sendRequest<R>(method, params);
    } catch (err) {
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
    if (client) await client.stop(2000).catch(() => undefined);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof ResponseError) return `${err.message} (code ${err.code})`;
  return err instanceof Error ? err.message : String(err);
}
