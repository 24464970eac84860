// Hovers, definitions and the file-history CodeLens for files the client does not sync
// (everything but the session JSONL files and fabric: documents): asked on demand with
// the file's URI only; the server reads the saved file from disk (bounded). Nothing is
// sent for a file until the user hovers an entry reference or a JSONL line, or a lens is due.
import * as vscode from 'vscode';
import { withOpenLink } from './hoverLink';
import type { Fabric } from './fabric';

const LENS_MAX_CHARS = 4 * 1024 * 1024;

export class Bridge implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private readonly lensChanged = new vscode.EventEmitter<void>();

  constructor(private readonly fabric: Fabric, private readonly synced: () => vscode.DocumentSelector) {
    const files: vscode.DocumentSelector = { scheme: 'file' };
    this.disposables.push(
      this.lensChanged,
      vscode.languages.registerHoverProvider(files, { provideHover: (d, p, t) => this.hover(d, p, t) }),
      vscode.languages.registerDefinitionProvider(files, { provideDefinition: (d, p, t) => this.definition(d, p, t) }),
      vscode.languages.registerCodeLensProvider(files, {
        onDidChangeCodeLenses: this.lensChanged.event,
        provideCodeLenses: (d, t) => this.codeLenses(d, t),
      }),
      vscode.workspace.onDidChangeConfiguration((e) => { if (e.affectsConfiguration('fabric.codeLens')) this.lensChanged.fire(); }),
      vscode.workspace.onDidSaveTextDocument(() => this.lensChanged.fire()),
    );
    fabric.onDidStart(() => this.lensChanged.fire());
  }

  /** Not synced, saved (the server reads the file), and the server is up. */
  private client(doc: vscode.TextDocument) {
    if (doc.isDirty || vscode.languages.match(this.synced(), doc) > 0) return undefined;
    const client = this.fabric.client;
    return client && client.isRunning() ? client : undefined;
  }

  /** An entry reference under the cursor, or a line of a JSONL file that may be a Pi session. */
  private worthAsking(doc: vscode.TextDocument, pos: vscode.Position): boolean {
    const line = doc.lineAt(pos.line).text;
    if (line.includes('pi-entry:')) return true;
    return doc.uri.path.endsWith('.jsonl') && /"type"\s*:\s*"session"/.test(doc.lineAt(0).text);
  }

  private async hover(doc: vscode.TextDocument, pos: vscode.Position, token: vscode.CancellationToken) {
    if (!this.worthAsking(doc, pos)) return undefined;
    if (!this.fabric.started) await this.fabric.start();
    const client = this.client(doc);
    if (!client) return undefined;
    const result = await client.sendRequest('textDocument/hover', {
      textDocument: { uri: client.code2ProtocolConverter.asUri(doc.uri) },
      position: client.code2ProtocolConverter.asPosition(pos),
    }, token).catch(() => null);
    return withOpenLink(result ? client.protocol2CodeConverter.asHover(result as any) : undefined, doc, pos);
  }

  private async definition(doc: vscode.TextDocument, pos: vscode.Position, token: vscode.CancellationToken) {
    if (!this.worthAsking(doc, pos)) return undefined;
    const client = this.client(doc);
    if (!client) return undefined;
    const result = await client.sendRequest('textDocument/definition', {
      textDocument: { uri: client.code2ProtocolConverter.asUri(doc.uri) },
      position: client.code2ProtocolConverter.asPosition(pos),
    }, token).catch(() => null);
    return result ? client.protocol2CodeConverter.asDefinitionResult(result as any, token) : undefined;
  }

  private async codeLenses(doc: vscode.TextDocument, token: vscode.CancellationToken) {
    if (!vscode.workspace.getConfiguration('fabric', doc.uri).get<boolean>('codeLens', true)) return [];
    if (doc.getText().length > LENS_MAX_CHARS) return [];
    const client = this.client(doc);
    if (!client) return [];
    const result = await client.sendRequest('textDocument/codeLens', {
      textDocument: { uri: client.code2ProtocolConverter.asUri(doc.uri) },
    }, token).catch(() => null);
    return result ? (await client.protocol2CodeConverter.asCodeLenses(result as any, token)) ?? [] : [];
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}
