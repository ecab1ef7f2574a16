// Types of parse-prometheus-text-format (the package ships none): prom2json's shape.
declare module 'parse-prometheus-text-format' {
  interface PromSample {
    labels?: Record<string, string>;
    value?: string;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  interface PromFamily {
    name: string;
    help: string;
    type: 'GAUGE' | 'COUNTER' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: PromSample[];
  }
  export default function parsePrometheusTextFormat(text: string): PromFamily[];
}
