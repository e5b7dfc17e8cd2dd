;; `tool-name` grows a table by 10,000 elements per step until something stops it.
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (global $next (mut i32) (i32.const 1024))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get 3)))
    (local.get $p))
  (func (export "edgar:schema/adapter@0.1.0#tool-name") (param i32 i32 i32 i32) (result i32)
    (loop $again
      (drop (table.grow $t (ref.null func) (i32.const 10000)))
      (br $again))
    unreachable)
  (func (export "edgar:schema/adapter@0.1.0#to-schema") (param i32 i32 i32 i32) (result i32)
    unreachable)
  (func (export "edgar:schema/adapter@0.1.0#to-result") (param i32 i32) (result i32)
    unreachable))
