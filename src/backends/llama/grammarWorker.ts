// The worker thread that turns output and tool-argument schemas into grammar text, so that a large schema (an
// enum of 100 000 values: ~0.9 s in node-llama-cpp's converter, 5 MB of GBNF) never holds the host's thread
// while other principals wait (grammarCompiler.ts is the host's side). It runs node-llama-cpp's converter alone
// (nativeSeams.ts, jsonSchemaConverterPath), then our hardening and the parser-limit check (jsonSchema.ts), and
// answers text or a message. Nothing native runs here: llama.cpp's parse of the text stays with the model's Llama.
import { parentPort } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { checkGrammarRepetitions, hardenGrammar } from './jsonSchema';
import { jsonSchemaConverterPath, type JsonSchemaConverter } from './nativeSeams';

export interface GrammarJob {
  id: number;
  schema: unknown;
}
export type GrammarReply = { id: number; ok: true; grammar: string } | { id: number; ok: false; message: string };

let converter: Promise<JsonSchemaConverter> | undefined;

function load(): Promise<JsonSchemaConverter> {
  converter ??= import(pathToFileURL(jsonSchemaConverterPath(require.resolve)).href).then((m: { getGbnfGrammarForGbnfJsonSchema?: unknown }) => {
    if (typeof m.getGbnfGrammarForGbnfJsonSchema !== 'function')
      throw new Error("node-llama-cpp's JSON-schema converter is not where this build expects it");
    return m.getGbnfGrammarForGbnfJsonSchema as JsonSchemaConverter;
  });
  return converter;
}

parentPort?.on('message', (job: GrammarJob) => {
  void (async (): Promise<GrammarReply> => {
    try {
      const grammar = hardenGrammar((await load())(job.schema));
      checkGrammarRepetitions(grammar);
      return { id: job.id, ok: true, grammar };
    } catch (err) {
      return { id: job.id, ok: false, message: err instanceof Error ? err.message : String(err) };
    }
  })().then((reply) => parentPort!.postMessage(reply));
});
