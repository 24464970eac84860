// End-to-end test of the extension's details page in the Extensions view (real code-server
// + headless chromium): the VSIX built by `npm run package` installed with
// `code-server --install-extension`, the Fabric entry opened from "@installed", and the
// README webview read from its frame.
//
//   node test/e2e/readme.mjs --vsix dist/fabric-lsp.vsix --code-server PATH [--screenshots DIR]
//
// What VS Code does with a locally installed extension's README (code-server 4.139.1, VS
// Code 1.139: the extension editor's renderMarkdown/renderBody in workbench.js): it reads
// readme.md from the extension's folder as it is (no <base>, no link rewriting), renders it
// with marked and sanitizes it with media protocols http and https only and no relative
// media paths, so `![alt](images/x.png)` keeps its alt text and loses its src, and nothing
// is requested. The webview's CSP, `img-src https: data:`, then refuses http images.
//
// Part 1 pins that down for the shipped README: every image is an <img> with its alt text,
// no src, naturalWidth 0 (it fails if VS Code starts loading them; the check should then
// become "every image loaded"). The header icon, which the workbench loads itself from the
// installed extension, is the control that naturalWidth tells loaded from not loaded.
// Part 2 writes each link form vsce could ship into the installed readme.md: only an https
// URL (answered here by a playwright route) loads; relative, ./, absolute path, file:,
// data:, vscode-remote-resource: and HTML <img src> lose their src, and the http resource
// URL the header icon uses is refused by the CSP.
//
// Prints `ok - name` / `not ok - name` and `N passed, N failed`; exit 0/1.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { startCodeServer } from './codeServer.mjs';
import { assert, clean, harness } from './harness.mjs';

const { values: opts } = parseArgs({
  options: {
    vsix: { type: 'string' },
    'code-server': { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    screenshots: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
if (!opts.vsix || !opts['code-server']) {
  console.error('usage: readme.mjs --vsix FILE --code-server PATH [--screenshots DIR]');
  process.exit(2);
}

const STEP_MS = 30_000;
const started = Date.now();
const log = (msg) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fabric-readme-'));
const failDir = path.join(root, 'failures');
const shotDir = opts.screenshots ? path.resolve(opts.screenshots) : path.join(root, 'shots');
fs.mkdirSync(failDir, { recursive: true });
fs.mkdirSync(shotDir, { recursive: true });

let page;
const ui = harness({ shotDir, failDir, stepMs: STEP_MS });
const { check } = ui;

/** The Extensions view searched for "@installed fabric" (replacing a restored query), and
 * the Fabric entry clicked: its details page opens. */
async function openDetails() {
  await page.keyboard.press('Control+Shift+X');
  await page.locator('.extensions-viewlet .suggest-input-container').click();
  await page.keyboard.press('Control+A');
  await page.keyboard.type('@installed fabric');
  await page.locator('.extensions-viewlet .extension-list-item', { hasText: 'Fabric for Pi sessions' }).first().click();
}

/** Markdown image links `![alt](target)` of a README, in order. */
function readmeImages(markdown) {
  return [...markdown.matchAll(/!\[([^\]]*)\]\(([^)\s]+)\)/g)].map((m) => ({ alt: m[1], target: m[2] }));
}

let server;
let context;
const consoleLines = [];
const requests = [];
try {
  // No Pi agent dir: the extension stays dormant (no server), which is all this page needs.
  const workspace = path.join(root, 'ws');
  fs.mkdirSync(workspace);
  server = await startCodeServer({
    codeServer: opts['code-server'],
    node: process.execPath,
    root: path.join(root, 'cs'),
    vsix: path.resolve(opts.vsix),
    log,
    settings: { 'fabric.agentDir': path.join(root, 'no-agent-dir') },
  });
  const dirs = fs.readdirSync(server.extensions).filter((n) => n.startsWith('fabric-lsp.fabric-lsp-'));
  assert(dirs.length === 1, `one installed Fabric extension: ${fs.readdirSync(server.extensions).join(', ')}`);
  const installed = path.join(server.extensions, dirs[0]);
  const readmeFile = fs.readdirSync(installed).find((n) => n.toLowerCase() === 'readme.md');
  assert(readmeFile, `a README in ${installed}: ${fs.readdirSync(installed).join(', ')}`);
  const readme = fs.readFileSync(path.join(installed, readmeFile), 'utf8');
  const images = readmeImages(readme);
  const title = readme.match(/^# (.+)$/m)[1].trim();
  const headings = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1].trim());

  await check('the installed README links its images relatively, and every image is in the installed extension', async () => {
    assert(images.length >= 10, `README images: ${images.length}`);
    for (const { target } of images) {
      assert(!/^([a-z][a-z0-9+.-]*:|\/)/i.test(target), `not a relative link: ${target}`);
      const file = path.join(installed, target);
      assert(fs.existsSync(file), `${target} is not in ${installed}`);
      assert(fs.readFileSync(file).subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex')), `${target} is a PNG`);
    }
  });

  context = await chromium.launchPersistentContext(path.join(root, 'chromium'), {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = context.pages()[0] ?? await context.newPage();
  ui.page = page;
  page.setDefaultTimeout(STEP_MS);
  // Console messages and requests of every frame, the webview's included.
  page.on('console', (msg) => consoleLines.push(`[${msg.type()}] ${msg.text()}`));
  page.on('pageerror', (err) => consoleLines.push(`[pageerror] ${err}`));
  page.on('request', (req) => requests.push(req.url()));
  await page.goto(`${server.url}/?folder=${encodeURIComponent(workspace)}`, { timeout: 60_000 });
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  await page.locator('.statusbar').waitFor();

  // The README webview: the extension editor's webview iframe, and the document inside it.
  const readmeDoc = page.frameLocator('.webview.ready').frameLocator('#active-frame');
  const heading = readmeDoc.locator('h1', { hasText: title });

  const opened = await check('the Fabric entry of "@installed" opens its details page with the README', async () => {
    await openDetails();
    await page.locator('.extension-editor .header .name', { hasText: 'Fabric for Pi sessions' }).waitFor();
    await page.locator('.extension-editor .navbar .action-label.checked', { hasText: /details/i }).waitFor();
    await heading.waitFor();
    const text = clean(await readmeDoc.locator('body').innerText());
    for (const h of headings) assert(text.includes(h), `README heading "${h}" on the page: ${text.slice(0, 600)}`);
    const source = clean(await page.locator('.extension-editor .additional-details-container').innerText());
    assert(/Source\s+VSIX/i.test(source), `installed from the VSIX: ${source.slice(0, 300)}`);
  });
  if (!opened) throw new Error('the details page never showed the README');

  // Every <img> of the README document once each has loaded or failed (decode() settles on
  // either; with no src it rejects at once). No timer: the images' own events.
  const shown = await readmeDoc.locator('body').evaluate(async (body) => {
    const imgs = [...body.querySelectorAll('img')];
    await Promise.all(imgs.map((img) => img.decode().catch(() => undefined)));
    return {
      csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.getAttribute('content') ?? null,
      base: document.querySelector('base')?.getAttribute('href') ?? null,
      imgs: imgs.map((img) => ({
        alt: img.getAttribute('alt'),
        src: img.getAttribute('src'),
        currentSrc: img.currentSrc,
        naturalWidth: img.naturalWidth,
      })),
    };
  });
  log(`README webview CSP: ${shown.csp}; <base>: ${shown.base}`);
  for (const img of shown.imgs) log(`<img alt=${JSON.stringify(img.alt)} src=${JSON.stringify(img.src)} naturalWidth=${img.naturalWidth}>`);

  await check('every README image is an <img> with its alt text, in README order', async () => {
    assert(shown.imgs.length === images.length,
      `${shown.imgs.length} <img> for ${images.length} README images: ${JSON.stringify(shown.imgs.map((i) => i.alt))}`);
    shown.imgs.forEach((img, i) => assert(img.alt === images[i].alt, `image ${i}: alt ${JSON.stringify(img.alt)}, README ${JSON.stringify(images[i].alt)}`));
  });

  await check('VS Code drops the src of every relative README image, so none is requested or loads', async () => {
    const loaded = shown.imgs.filter((img) => img.naturalWidth > 0);
    assert(loaded.length === 0,
      `README images now load (${loaded.map((i) => i.currentSrc).join(', ')}): VS Code resolves them; `
      + 'make this check require naturalWidth > 0 for every image and update the README\'s note');
    const withSrc = shown.imgs.filter((img) => img.src !== null);
    assert(withSrc.length === 0, `an image kept a src (VS Code's handling changed): ${JSON.stringify(withSrc)}`);
    // The webview CSP would also refuse anything but https: and data: images.
    assert(/(^|;)\s*img-src https: data:\s*(;|$)/.test(shown.csp ?? ''), `webview CSP: ${shown.csp}`);
    assert(shown.base === null, `a <base> in the README document: ${shown.base}`);
    const decoded = (u) => { try { return decodeURIComponent(u); } catch { return u; } };
    const fetched = requests.filter((u) => images.some(({ target }) => decoded(u).includes(target.replace(/^\.\//, ''))));
    assert(fetched.length === 0, `README image requests: ${fetched.join(', ')}`);
    const refused = consoleLines.filter((l) => /Content Security Policy|img-src/i.test(l));
    assert(refused.length === 0, `CSP messages: ${refused.join('\n')}`);
  });

  await check('control: the header icon, loaded by the workbench from the installed extension, has naturalWidth > 0', async () => {
    const icon = page.locator('.extension-editor .header .icon').first();
    await icon.waitFor();
    const info = await icon.evaluate(async (img) => {
      await img.decode().catch(() => undefined);
      return { src: img.currentSrc, naturalWidth: img.naturalWidth };
    });
    log(`header icon: ${info.src} naturalWidth=${info.naturalWidth}`);
    assert(info.naturalWidth > 0, `the icon did not load: ${JSON.stringify(info)}`);
    assert(/images(\/|%2F)icon\.png/i.test(info.src), `the icon is the extension's images/icon.png: ${info.src}`);
  });

  await check('the details page shows the alt text where each image would be (screenshot)', async () => {
    const first = readmeDoc.locator('img').first();
    await first.scrollIntoViewIfNeeded();
    const box = await first.boundingBox();
    assert(box && box.width > 0 && box.height > 0, `the first image's alt text takes space on the page: ${JSON.stringify(box)}`);
    await page.screenshot({ path: path.join(shotDir, 'vscode-extension-details.png') });
    log(`screenshot: ${path.join(shotDir, 'vscode-extension-details.png')}`);
  });

  // Which link forms would load an extension-local image? The installed readme.md is what
  // vsce packs (verbatim with --no-rewrite-relative-links), so each form goes into it, the
  // window is reloaded and the details page reopened. The https image is answered by this
  // test (a playwright route): the positive control inside the README webview.
  const icon = path.join(installed, 'images', 'icon.png');
  const iconBytes = fs.readFileSync(icon);
  const httpsImage = 'https://fabric-readme-test.invalid/icon.png';
  await context.route(httpsImage, (route) => route.fulfill({ status: 200, contentType: 'image/png', body: iconBytes }));
  const commit = requests.map((u) => u.match(/\/stable-([0-9a-f]{40})\//)?.[1]).find(Boolean);
  const forms = {
    'relative': 'images/icon.png',
    'dot-relative': './images/icon.png',
    'absolute path': encodeURI(icon),
    'file URI': `file://${encodeURI(icon)}`,
    'data URI': `data:image/png;base64,${iconBytes.toString('base64')}`,
    'vscode-remote-resource URI': `vscode-remote-resource://${new URL(server.url).host}${encodeURI(icon)}`,
    'http resource URL (as the header icon)': `${server.url}/stable-${commit}/vscode-remote-resource?path=${encodeURIComponent(icon)}&tkn=`,
    'https URL': httpsImage,
  };
  const formsTitle = 'README link forms';
  let md = `# ${formsTitle}\n\n`;
  for (const [name, link] of Object.entries(forms)) md += `![${name}](${link})\n\n`;
  md += '<img alt="HTML img, relative" src="images/icon.png">\n';
  fs.writeFileSync(path.join(installed, readmeFile), md);
  await page.reload({ timeout: 60_000 });
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  const formsHeading = readmeDoc.locator('h1', { hasText: formsTitle });
  await check('of all README link forms only an https URL loads an image in the details page', async () => {
    await openDetails();
    await formsHeading.waitFor();
    const got = await readmeDoc.locator('body').evaluate(async (body) => {
      const imgs = [...body.querySelectorAll('img')];
      await Promise.all(imgs.map((img) => img.decode().catch(() => undefined)));
      return imgs.map((img) => ({ alt: img.getAttribute('alt'), src: img.getAttribute('src'), naturalWidth: img.naturalWidth }));
    });
    for (const g of got) log(`${g.alt}: src ${g.src === null ? 'removed' : 'kept'}, naturalWidth ${g.naturalWidth}`);
    const by = Object.fromEntries(got.map((g) => [g.alt, g]));
    assert(got.length === Object.keys(forms).length + 1, `one <img> per form: ${JSON.stringify(got)}`);
    assert(by['https URL'].src === httpsImage && by['https URL'].naturalWidth === 128, `the https image loads: ${JSON.stringify(by['https URL'])}`);
    const httpForm = 'http resource URL (as the header icon)';
    assert(by[httpForm].src === forms[httpForm] && by[httpForm].naturalWidth === 0, `the http URL is kept and refused: ${JSON.stringify(by[httpForm])}`);
    assert(consoleLines.some((l) => l.includes('vscode-remote-resource?path=') && /violates the following Content Security Policy directive: "img-src https: data:"/.test(l)),
      `the CSP refusal of the http image is in the console: ${consoleLines.filter((l) => /Security Policy/.test(l)).join('\n')}`);
    for (const g of got.filter((x) => x.alt !== 'https URL' && x.alt !== httpForm)) {
      assert(g.src === null && g.naturalWidth === 0, `${g.alt}: the sanitizer keeps its src now (${JSON.stringify(g)})`);
    }
    await formsHeading.scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(shotDir, 'vscode-extension-details-link-forms.png') });
  });
} catch (err) {
  ui.failed += 1;
  console.log('not ok - harness');
  console.log(String(err?.stack ?? err).split('\n').map((l) => `#   ${l}`).join('\n'));
} finally {
  for (const l of consoleLines.filter((l) => /^\[(error|pageerror)\]/.test(l)).slice(0, 20)) console.log(`# console: ${l.slice(0, 300)}`);
  await context?.close().catch(() => undefined);
  await server?.stop().catch(() => undefined);
  const csLog = path.join(root, 'cs', 'code-server.log');
  if (ui.failed > 0 && fs.existsSync(csLog)) {
    console.log(fs.readFileSync(csLog, 'utf8').split('\n').slice(-30).map((l) => `# code-server: ${l}`).join('\n'));
  }
  if (!opts.keep && ui.failed === 0) fs.rmSync(root, { recursive: true, force: true });
  else console.log(`# kept ${root}`);
  console.log(`${ui.passed} passed, ${ui.failed} failed`);
  process.exit(ui.failed === 0 ? 0 : 1);
}
