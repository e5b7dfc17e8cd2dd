// Builds adapter.js into a component of the `schema-adapter` world with ComponentizeJS,
// with every WASI feature off: the component imports nothing but what it needs.
// Usage: node build.mjs WIT_DIR OUT.wasm
import { componentize } from '@bytecodealliance/componentize-js';
import { readFile, writeFile } from 'node:fs/promises';

const [witPath, out] = process.argv.slice(2);
const source = await readFile(new URL('./adapter.js', import.meta.url), 'utf8');
const { component } = await componentize(source, {
  witPath,
  worldName: 'schema-adapter',
  disableFeatures: ['random', 'stdio', 'clocks', 'http', 'fetch-event'],
});
await writeFile(out, component);
console.log(`wrote ${out} (${component.length} bytes)`);
