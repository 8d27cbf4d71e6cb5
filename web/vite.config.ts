import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';

const root = dirname(fileURLToPath(import.meta.url));

// The files the build is made from. web_test.go lists the same ones and
// fails when static/build-hash.txt no longer matches them, so a change to
// any of them without a rebuild is caught by `go test`, without npm.
const buildInputs = ['index.html', 'app/index.html', 'package.json', 'package-lock.json', 'vite.config.ts', 'tsconfig.json', 'src'];

function listFiles(path: string): string[] {
  const abs = join(root, path);
  let entries;
  try {
    entries = readdirSync(abs, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return [path];
    throw err;
  }
  // Hidden files (editor swap files, .DS_Store) are not build inputs.
  return entries.filter((e) => !e.name.startsWith('.')).flatMap((e) => listFiles(relative(root, join(abs, e.name)).split(sep).join('/')));
}

// buildHash writes build-hash.txt: the sha256 of each build input, one
// "<hex>  <path>" line per file in byte order of the paths, as sha256sum
// prints them.
function buildHash(): Plugin {
  return {
    name: 'herald-build-hash',
    apply: 'build',
    generateBundle() {
      const files = buildInputs.flatMap(listFiles).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const lines = files.map((f) => `${createHash('sha256').update(readFileSync(join(root, f))).digest('hex')}  ${f}\n`);
      this.emitFile({ type: 'asset', fileName: 'build-hash.txt', source: lines.join('') });
    },
  };
}

export default defineConfig({
  root,
  base: '/',
  // Nothing is copied verbatim: every file in static/ comes from the build.
  publicDir: false,
  esbuild: { jsx: 'automatic', legalComments: 'none' },
  build: {
    outDir: 'static',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2022',
    // Monaco alone is several MB; the warning would only be noise.
    chunkSizeWarningLimit: 8192,
    rollupOptions: {
      onwarn(warning, warn) {
        // framer-motion (a GraphiQL dependency) marks its modules "use
        // client", a React Server Components hint that means nothing here.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
      input: {
        playground: join(root, 'index.html'),
        app: join(root, 'app/index.html'),
      },
      output: {
        // Libraries go in one vendor chunk of the playground's, and Vite's
        // preload helper in a chunk of its own, so no library chunk imports
        // Herald's code: an edit of Herald's pages then renames their own
        // chunks only, not the megabytes of Monaco (which rebuilt whole, and
        // grew git by as much, at each edit). graphql-ws stays out of it: the
        // demo client shares it and must not load the playground's vendor.
        manualChunks(id) {
          if (id.includes('vite/preload-helper') || id.includes('commonjsHelpers')) return 'runtime';
          if (!id.includes('/node_modules/') || id.includes('/node_modules/graphql-ws/')) return undefined;
          return 'vendor';
        },
      },
    },
  },
  worker: { format: 'es' },
  plugins: [buildHash()],
});
