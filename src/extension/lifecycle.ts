// Disposable base in the style of vscode-pull-request-github: children registered with _register() are disposed
// with their owner, in reverse order. Pure (no vscode) so it also serves the model layer.

export interface IDisposable {
  dispose(): void;
}

export function toDisposable(fn: () => void): IDisposable {
  let done = false;
  return {
    dispose() {
      if (done) return;
      done = true;
      fn();
    },
  };
}

/** Disposes every item, last first; one failing item does not stop the others. */
export function disposeAll(items: IDisposable[]): void {
  const errors: unknown[] = [];
  while (items.length) {
    const item = items.pop()!;
    try {
      item.dispose();
    } catch (e) {
      errors.push(e);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, 'several disposables failed');
}

export abstract class Disposable implements IDisposable {
  private _isDisposed = false;
  private readonly _toDispose: IDisposable[] = [];

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) return;
    this._isDisposed = true;
    disposeAll(this._toDispose);
  }

  /** Registers a child; when this object is already disposed the child is disposed at once. */
  protected _register<T extends IDisposable>(value: T): T {
    if (this._isDisposed) value.dispose();
    else this._toDispose.push(value);
    return value;
  }
}
