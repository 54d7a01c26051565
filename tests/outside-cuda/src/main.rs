//! A program with its own cudarc on CUDA 13.0's headers and the CUDA
//! backend on the same ones: one set of bindings, which both name.

fn main() {
    let built_against = sigretire_cuda::CudaVersion::BUILT_AGAINST;
    assert_eq!(
        built_against,
        sigretire_cuda::CudaVersion::from_encoded(cudarc::driver::sys::CUDA_VERSION as i32),
        "one cudarc, one version"
    );
    println!("sigretire-cuda and this program's cudarc: CUDA {built_against} headers");
    match sigretire_cuda::CudaContext::new(0) {
        Ok(context) => println!("{}", context.report()),
        Err(error) => println!("no GPU here: {error}"),
    }
}
