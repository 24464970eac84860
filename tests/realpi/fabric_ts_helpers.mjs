// Calls the extension's own helpers (editors/pi/extensions/fabric.ts) for each case read
// from stdin ([{fn, args}]) and prints [{ok: value} | {error: message}] in order.
const [extension] = process.argv.slice(2);
const m = await import(extension);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const { fn, args } of JSON.parse(input)) {
  try {
    out.push({ ok: m[fn](...args) });
  } catch (err) {
    out.push({ error: String(err.message) });
  }
}
process.stdout.write(JSON.stringify(out));
